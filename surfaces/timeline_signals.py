"""The signals and decisions in a task's history, and which approval decisions counted.

A decision sent through the `openloop.task.decide` update is in the history only when it
counted (the update's validator refuses the others, and the surface audits them). A decision
signal that did not count (wrong request, different arguments, not an approver, already
decided) leaves only its signal in the history (the task audits it in Postgres); this module
reads why from the same rule the task applies (`workflows.approval_rule`) and the request
the task had posted (with the approvers it resolved), so `openloop explain` shows refused
decisions with their reason.
Pure functions over recorded data.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.common.v1 import Payloads
from temporalio.api.history.v1 import HistoryEvent

from config.agent import AgentConfig
from surfaces.timeline_entries import EntryKind
from workflows.approval_rule import allowed_ids, decision_problem
from workflows.payloads import data_converter
from workflows.types import (
    DECIDE_UPDATE,
    ApprovalDecision,
    ApprovalRequest,
    BudgetExtension,
    CancelRequest,
    Decision,
    UserMessage,
)

SIGNAL_TYPES: dict[str, type] = {
    "approve": ApprovalDecision,
    "deny": ApprovalDecision,
    "user_message": UserMessage,
    "cancel": CancelRequest,
    "extend_budget": BudgetExtension,
}


def decode(payloads: Payloads, type_: type) -> Any:
    if not payloads.payloads:
        return None
    try:
        return data_converter.payload_converter.from_payloads(payloads.payloads, [type_])[0]
    except Exception:  # a payload this version cannot read is skipped, not fatal
        return None


class GateView:
    """The approval request a task was waiting on at each point of its history."""

    def __init__(self) -> None:
        self.agent: AgentConfig | None = None
        self.pending: ApprovalRequest | None = None
        self.decided = False
        self.used: set[str] = set()
        self.approver_ids: list[str] | None = None  # the last resolution, None before any

    def posted(self, request: ApprovalRequest) -> None:
        self.pending, self.decided = request, False

    def resolved(self) -> None:
        if self.pending is not None:
            self.used.add(self.pending.request_id)
        self.pending, self.decided = None, False

    def problem_with(self, decision: ApprovalDecision) -> str | None:
        """Why the task ignored this decision, or None when it counted (the task's own rule)."""
        pending = None if self.decided else self.pending
        problem = decision_problem(
            pending, decision.request_id, decision.action_id, decision.approver, None, self.used
        )
        if problem is not None:
            return problem.reason
        self.decided = True
        return None


def signal_entry(event: HistoryEvent, gate: GateView) -> tuple[EntryKind, str, str | None]:
    """(kind, what, who) of a signal; kind is `refused` for a decision that did not count."""
    attrs = event.workflow_execution_signaled_event_attributes
    name = attrs.signal_name
    return _told(name, decode(attrs.input, SIGNAL_TYPES.get(name, dict)), gate)


def update_entry(event: HistoryEvent, gate: GateView) -> tuple[EntryKind, str, str | None] | None:
    """(kind, what, who) of an accepted decision update, told as the signal it stands for."""
    request = event.workflow_execution_update_accepted_event_attributes.accepted_request
    if request.input.name != DECIDE_UPDATE:
        return None
    decision = decode(request.input.args, Decision)
    if not isinstance(decision, Decision):
        return None
    if decision.extend is not None:
        return _told("extend_budget", decision.extend, gate)
    name = "approve" if decision.approve is not None else "deny"
    return _told(name, decision.approve or decision.deny, gate)


def _told(name: str, value: Any, gate: GateView) -> tuple[EntryKind, str, str | None]:
    if isinstance(value, ApprovalDecision):
        problem = gate.problem_with(value)
        if problem is not None:
            return EntryKind.REFUSED, f"{name} from {value.approver} ignored: {problem}", value.approver
        return EntryKind.SIGNAL, f"{name} from {value.approver}", value.approver
    if isinstance(value, UserMessage):
        return EntryKind.SIGNAL, f"message from {value.user}: {value.text[:100]}", value.user
    if isinstance(value, CancelRequest):
        reason = f": {value.reason}" if value.reason else ""
        return EntryKind.SIGNAL, f"cancel from {value.by}{reason}", value.by
    if isinstance(value, BudgetExtension):
        listed = list(gate.agent.spec.approvals.approvers) if gate.agent is not None else None
        if listed is not None and value.by not in allowed_ids(listed, gate.approver_ids):
            return EntryKind.REFUSED, f"budget extension from {value.by} ignored: not an approver", value.by
        what = (
            f"extend budget from {value.by}: +${value.usd:.2f}, +{value.tokens} tokens, "
            f"+{value.iterations} iterations"
        )
        return EntryKind.SIGNAL, what, value.by
    return EntryKind.SIGNAL, name, None
