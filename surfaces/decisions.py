"""Whether an approval decision counts, checked where a person makes it (a Slack click, the
dashboard) against the task's pending request (its `status` query), so the person hears at
once; and a task's status as a list shows it. One module, shared by every surface.

The rule itself is `workflows.approval_rule`, the very function the task applies to the
decision signal: only the clock differs (a surface reads the wall clock, the task its TTL
timer). Here it is worded for the person who clicked.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from temporalio.client import WorkflowExecutionStatus

from workflows import search
from workflows.approval_rule import DecisionProblem
from workflows.approval_rule import decision_problem as rule
from workflows.types import TaskStatusView

# How a closed request reads after "This approval request …".
_CLOSED = {
    "closed": "was already decided or has expired",
    "mismatch": "is for different arguments than the pending action",
    "expired": "has expired",
}


def refusal(view: TaskStatusView, request_id: str, action_id: str, approver: str) -> DecisionProblem | None:
    """Why `approver`'s decision for (request_id, action_id) would not count now, or None."""
    return rule(view.pending_approval, request_id, action_id, approver, datetime.now(UTC))


def closed_reason(problem: DecisionProblem) -> str:
    """A refusal other than "not an approver", as "This approval request {reason}" ends."""
    return _CLOSED.get(problem.kind, problem.reason)


def decision_problem(
    view: TaskStatusView, request_id: str, action_id: str, approver: str | None = None
) -> str | None:
    """Why a decision for (request_id, action_id) would not count now, or None. Without an
    approver, only whether the request is still open for these arguments."""
    problem = refusal(view, request_id, action_id, approver or "")
    if problem is None or (approver is None and problem.kind == "not_approver"):
        return None
    return closed_reason(problem) if problem.kind != "not_approver" else problem.reason


def status_of(execution: Any) -> str:
    """The OpenLoop status, unless Temporal ended the run some other way (terminated...)."""
    recorded = execution.typed_search_attributes.get(search.STATUS)
    temporal = execution.status
    if temporal not in (
        None,
        WorkflowExecutionStatus.RUNNING,
        WorkflowExecutionStatus.COMPLETED,
        WorkflowExecutionStatus.CONTINUED_AS_NEW,
    ):
        return temporal.name if temporal else "UNKNOWN"  # terminated, timed out: no result
    return str(recorded) if recorded else (temporal.name if temporal else "UNKNOWN")
