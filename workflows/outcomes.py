"""Why a task stopped and what to do next: one place for every stop reason's wording."""

from __future__ import annotations

from workflows.types import TaskStatus

NEXT_ACTION: dict[TaskStatus, str] = {
    TaskStatus.SUCCESS: "Nothing to do; follow up in the same thread to continue.",
    TaskStatus.BUDGET_EXHAUSTED: "Extend the task (`openloop extend TASK_ID --usd 0.50`) "
    "or raise the agent's limits, then ask again.",
    TaskStatus.NO_PROGRESS: "The agent repeated the same action with the same result; "
    "rephrase the request or check the tool it was calling.",
    TaskStatus.APPROVAL_DENIED: "The action was denied; ask again with a different request "
    "if it is still needed.",
    TaskStatus.APPROVAL_EXPIRED: "Nobody decided in time and nothing was executed; ask again "
    "and ping an approver.",
    TaskStatus.CANCELLED: "Nothing to do; start a new task if it is still needed.",
    TaskStatus.ERROR: "Check `openloop explain TASK_ID` for the failing step; fix the "
    "configuration or provider access and ask again.",
}


def next_action(status: TaskStatus, task_id: str) -> str:
    return NEXT_ACTION.get(status, "").replace("TASK_ID", task_id)


def status_line(status: TaskStatus, reason: str) -> str:
    """A short line for the thread when a task stops for any reason but success."""
    labels = {
        TaskStatus.BUDGET_EXHAUSTED: "Paused: budget exhausted",
        TaskStatus.NO_PROGRESS: "Stopped: no progress",
        TaskStatus.APPROVAL_DENIED: "Stopped: approval denied",
        TaskStatus.APPROVAL_EXPIRED: "Stopped: approval expired",
        TaskStatus.CANCELLED: "Cancelled",
        TaskStatus.ERROR: "Stopped: error",
    }
    return f"{labels.get(status, status.value)} — {reason}"
