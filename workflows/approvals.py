"""Approvals inside a task: one pending request at a time, decided by a person.

A decision counts only when it names the pending request id, the exact action id (tool +
canonical arguments) and comes from one of the request's approvers: the rule is
`workflows.approval_rule`. Surfaces send decisions through the `openloop.task.decide` update,
whose validator applies the rule (`workflows.decisions`), so a refused one never reaches the
history; a decision signal (the older way, still accepted) that breaks it is ignored and
audited. Before a request is posted, an activity resolves its approvers (user groups,
@handles) to user ids and estimates the cost of finishing the task; both travel in the
request, so the decision rule reads workflow state only. Used request ids are remembered
(and carried across continue-as-new), so a replayed decision never executes anything twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import approver_attribute, policy
    from workflows.activity_options import LOCAL_OPTIONS, SURFACE_OPTIONS
    from workflows.approval_rule import DecisionProblem, decision_problem
    from workflows.message_types import PrepareApprovalInput, PrepareApprovalResult
    from workflows.types import (
        ActivityName,
        ApprovalDecision,
        ApprovalRecord,
        ApprovalRequest,
        AuditEvent,
        PostApprovalRequestInput,
        PostApprovalRequestResult,
        ResolveApprovalRequestInput,
        TaskInput,
    )


@dataclass
class GateDecision:
    outcome: str  # approved | denied | expired | cancelled
    by: str
    record: ApprovalRecord | None = None


class ApprovalGate:
    def __init__(self, inp: TaskInput, used_request_ids: set[str]):
        self.inp = inp
        self.used_request_ids = used_request_ids
        self.pending: ApprovalRequest | None = None
        self.message_ref: str | None = None
        self.decision: tuple[bool, ApprovalDecision] | None = None

    async def request(
        self,
        step: int,
        call_id: str,
        tool: str,
        arguments: dict[str, object],
        model: str,
        cancelled: Callable[[], bool],
    ) -> GateDecision:
        """Post an approval request and wait for a valid decision or the TTL."""
        agent = self.inp.agent
        now = workflow.now()
        ttl = agent.spec.approvals.ttl_seconds
        request = ApprovalRequest(
            request_id=f"apr-{self.inp.task_id[-24:]}-{step}-{call_id[-12:]}",
            action_id=policy.action_id(tool, arguments),
            tool=tool,
            arguments=arguments,
            approvers=list(agent.spec.approvals.approvers),
            requested_at_iso=now.isoformat(),
            expires_at_iso=(now + timedelta(seconds=ttl)).isoformat(),
            model=model,
            estimated_cost_usd=0.0,
        )
        request = await self._prepared(request, step, model)
        self.pending = request
        approver_attribute.publish(request, self.inp.context.user, self.inp.request)
        self.decision = None
        posted: PostApprovalRequestResult = await workflow.execute_activity(
            ActivityName.POST_APPROVAL_REQUEST,
            PostApprovalRequestInput(self.inp.task_id, self.inp.context, request, agent.name),
            result_type=PostApprovalRequestResult,
            **SURFACE_OPTIONS,
        )
        self.message_ref = posted.message_ref
        await self.audit(step, f"{call_id}:requested", "approval_requested", tool, arguments, "waiting")
        try:
            await workflow.wait_condition(
                lambda: self.decision is not None or cancelled(), timeout=timedelta(seconds=ttl)
            )
        except TimeoutError:
            await self._resolve("expired", None)
            await self.audit(step, f"{call_id}:expired", "approval_expired", tool, arguments, "expired")
            return GateDecision("expired", "nobody")
        if self.decision is None:
            await self._resolve("cancelled", None)
            return GateDecision("cancelled", "nobody")
        approved, decision = self.decision
        outcome = "approved" if approved else "denied"
        await self._resolve(outcome, decision.approver)
        await self.audit(
            step,
            f"{call_id}:{outcome}",
            f"approval_{outcome}",
            tool,
            arguments,
            outcome,
            approver=decision.approver,
        )
        record = ApprovalRecord(
            request.request_id, request.action_id, decision.approver, workflow.now().isoformat()
        )
        return GateDecision(outcome, decision.approver, record if approved else None)

    async def receive(self, decision: ApprovalDecision, approved: bool, now: datetime) -> None:
        """A decision signal: take it if it is valid for the pending request, else audit why not."""
        problem = self.problem_with(decision)
        if problem is None:
            self.take(decision, approved)
            return
        pending = self.pending
        await self.audit(
            0,
            f"ignored:{decision.request_id}:{decision.approver}:{now.isoformat()}",
            "approval_ignored",
            pending.tool if pending else None,
            None,
            problem.reason,
            approver=decision.approver,
        )

    def take(self, decision: ApprovalDecision, approved: bool) -> None:
        """Take a decision the rule let through: it decides the pending request."""
        assert self.pending is not None
        self.used_request_ids.add(self.pending.request_id)
        self.decision = (approved, decision)

    async def _prepared(self, request: ApprovalRequest, step: int, model: str) -> ApprovalRequest:
        """The request with its approvers resolved to user ids and the cost of finishing."""
        spec = self.inp.agent.spec
        prepared: PrepareApprovalResult = await workflow.execute_activity(
            ActivityName.PREPARE_APPROVAL,
            PrepareApprovalInput(
                self.inp.task_id,
                list(request.approvers),
                model,
                step,
                spec.limits.max_iterations,
                spec.model_policy.max_output_tokens,
            ),
            result_type=PrepareApprovalResult,
            **SURFACE_OPTIONS,
        )
        return replace(
            request,
            approver_ids=list(prepared.approver_ids),
            estimated_cost_usd=prepared.estimated_cost_usd,
            estimate_note=prepared.estimate_note,
        )

    def problem_with(self, decision: ApprovalDecision, now: datetime | None = None) -> DecisionProblem | None:
        """Why `decision` does not count now, or None. Without `now`, the TTL timer alone ends
        the request (it ends the wait at expiry)."""
        pending = None if self.decision is not None else self.pending
        return decision_problem(
            pending, decision.request_id, decision.action_id, decision.approver, now, self.used_request_ids
        )

    async def close(self, outcome: str) -> None:
        """A finished or cancelled task resolves its pending request as not approved."""
        if self.pending is not None and self.decision is None:
            await self._resolve(outcome, None)

    async def _resolve(self, outcome: str, by: str | None) -> None:
        request = self.pending
        if request is None:
            return
        self.used_request_ids.add(request.request_id)
        self.pending = None
        approver_attribute.publish(None)
        await workflow.execute_activity(
            ActivityName.RESOLVE_APPROVAL_REQUEST,
            ResolveApprovalRequestInput(
                self.inp.task_id,
                self.inp.context,
                request,
                self.message_ref,
                outcome,
                by,
                workflow.now().isoformat(),
            ),
            **SURFACE_OPTIONS,
        )

    async def audit(
        self,
        step: int,
        key: str,
        kind: str,
        tool: str | None,
        arguments: dict[str, object] | None,
        outcome: str,
        approver: str | None = None,
    ) -> None:
        event = self.audit_event(step, key, kind, tool, arguments, outcome, approver)
        await workflow.execute_local_activity(ActivityName.RECORD_AUDIT, event, **LOCAL_OPTIONS)

    def audit_event(
        self,
        step: int,
        key: str,
        kind: str,
        tool: str | None,
        arguments: dict[str, object] | None,
        outcome: str,
        approver: str | None = None,
    ) -> AuditEvent:
        """This task's audit row; pure, so a validator can build one for its caller to record."""
        agent = self.inp.agent
        return AuditEvent(
            task_id=self.inp.task_id,
            step=step,
            key=f"{step}:{key}",
            agent=agent.name,
            workspace=agent.workspace,
            channel=self.inp.context.channel,
            kind=kind,
            actor=self.inp.context.user,
            tool=tool,
            arguments=arguments,
            outcome=outcome,
            approver=approver,
        )
