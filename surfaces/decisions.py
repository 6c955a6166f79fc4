"""Whether an approval decision counts, checked where a person makes it (a Slack click, the
dashboard) with the rule the task itself applies, so the person hears at once; and a task's
status as a list shows it. One module, shared by every surface."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from temporalio.client import WorkflowExecutionStatus

from workflows import search
from workflows.types import TaskStatusView


def decision_problem(view: TaskStatusView, request_id: str, action_id: str) -> str | None:
    """Why a decision for (request_id, action_id) would not count now, or None."""
    pending = view.pending_approval
    if pending is None or pending.request_id != request_id:
        return "was already decided or has expired"
    if pending.action_id != action_id:
        return "is for different arguments than the pending action"
    try:
        expired = datetime.fromisoformat(pending.expires_at_iso) <= datetime.now(UTC)
    except ValueError:
        expired = False
    return "has expired" if expired else None


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
