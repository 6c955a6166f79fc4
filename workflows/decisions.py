"""A person's decisions on a task, through one door: the `openloop.task.decide` update.

A decision approves or denies the pending approval request, or extends a paused task's
budget. The update's validator applies the rule (`workflows.approval_rule`, through the
approval gate; an extension counts from whoever may approve, `workflows.budget_extenders`)
and refuses a decision that breaks it, so the caller hears at once whether it counted and
a stale or foreign decision never reaches the history. A validator can neither run an
activity nor change state, so the refusal carries its audit row, built here, and the caller
records it (`surfaces.decisions.decide`): every refused decision is audited, with its reason.

The handler takes an accepted decision. It runs right after the validator, in the same
workflow task, and applies the rule again all the same (a replay runs no validator), so what
it takes never depends on the validator having run; a refusal there is returned with its
audit row too. The decision signals (approve, deny, extend_budget: the older way, still
accepted) take the same path through the gate and the extenders.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

import math

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.types import (
        DECISION_REFUSED,
        ApprovalDecision,
        BudgetExtension,
        Decision,
        DecisionVerdict,
        TaskInput,
    )

from workflows.approvals import ApprovalGate
from workflows.budget_extenders import BudgetExtenders
from workflows.task_record import TaskRecord
from workflows.usage_meter import UsageMeter


class Decisions:
    def __init__(
        self,
        inp: TaskInput,
        gate: ApprovalGate,
        extenders: BudgetExtenders,
        meter: UsageMeter,
        record: TaskRecord,
    ) -> None:
        self.inp = inp
        self.gate = gate
        self.extenders = extenders
        self.meter = meter
        self.record = record

    def validate(self, decision: Decision) -> None:
        """The validator: raise `DecisionRefused` (the verdict in its details) unless it counts."""
        verdict = self.refusal(decision)
        if verdict is not None:
            raise ApplicationError(verdict.reason, verdict, type=DECISION_REFUSED, non_retryable=True)

    def refusal(self, decision: Decision) -> DecisionVerdict | None:
        """Why `decision` would not count now, as a verdict with its audit row; None if it counts."""
        listed = list(self.inp.agent.spec.approvals.approvers)
        extension = decision.extend
        answer = decision.approve or decision.deny
        if sum(part is not None for part in (decision.approve, decision.deny, extension)) != 1:
            return self._refused(decision, "invalid", "a decision is one of approve, deny or extend", listed)
        if extension is not None:
            amounts = (extension.usd, extension.tokens, extension.iterations)
            if not all(math.isfinite(a) and a >= 0 for a in amounts) or max(amounts) <= 0:
                reason = "an extension adds to the budget and takes nothing away"
                return self._refused(decision, "invalid", reason, listed)
            if not self.extenders.may_extend(extension.by):
                reason = f"{extension.by} is not an approver of this agent"
                return self._refused(decision, "not_approver", reason, listed)
            return None
        assert answer is not None
        # With this workflow task's time: a click just after expiry hears so before the timer fires.
        problem = self.gate.problem_with(answer, workflow.now())
        if problem is None:
            return None
        pending = self.gate.pending
        return self._refused(decision, problem.kind, problem.reason, pending.approvers if pending else listed)

    def take(self, decision: Decision) -> DecisionVerdict:
        """The handler: take a decision the validator let through, by the same rule again."""
        refused = self.refusal(decision)
        if refused is not None:
            return refused
        if decision.extend is not None:
            self.extend(decision.extend)
        else:
            answer = decision.approve or decision.deny
            assert answer is not None
            self.gate.take(answer, approved=decision.approve is not None)
        return DecisionVerdict(True)

    def extend(self, extension: BudgetExtension) -> None:
        """Raise the ceilings if the sender may extend them; else record that they may not."""
        if not self.extenders.may_extend(extension.by):
            self.record.record("refused", f"budget extension by {extension.by} ignored: not an approver")
            return
        self.meter.extend(extension)
        self.record.record(
            "message",
            f"{extension.by} extended the budget by ${extension.usd:.2f}, "
            f"{extension.tokens} tokens, {extension.iterations} iterations",
            actor=extension.by,
        )

    def _refused(
        self, decision: Decision, problem: str, reason: str, approvers: list[str]
    ) -> DecisionVerdict:
        answer: ApprovalDecision | None = decision.approve or decision.deny
        pending = self.gate.pending
        if decision.extend is not None:
            kind, tool = "budget_extension_refused", None
            extension = decision.extend
            arguments: dict[str, object] = {
                "usd": extension.usd,
                "tokens": extension.tokens,
                "iterations": extension.iterations,
            }
        else:
            kind, tool = "approval_refused", pending.tool if pending is not None else None
            arguments = {
                "decision": "approve" if decision.approve is not None else "deny",
                "request_id": answer.request_id if answer is not None else "",
            }
        # The update's id is unique to the call: its audit row is written once, however retried.
        update = workflow.current_update_info()
        key = f"refused:{update.id if update else workflow.now().isoformat()}"
        audit = self.gate.audit_event(0, key, kind, tool, arguments, reason, approver=decision.by)
        return DecisionVerdict(False, reason, problem, list(approvers), audit)
