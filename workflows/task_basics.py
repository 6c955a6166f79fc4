"""The names every other type module builds on: the workflow's name, activity names, task
statuses, where a task came from, and what it has spent. Released names are permanent."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

WORKFLOW_NAME = "openloop.AgentTask"


class ActivityName:
    """Stable activity names: renaming one is a migration for tasks in flight."""

    CALL_MODEL = "openloop.model.call"
    RUN_TOOL = "openloop.tool.run"
    RECALL = "openloop.memory.recall"
    RECORD_AUDIT = "openloop.audit.record"
    POST_REPLY = "openloop.surface.post_reply"
    POST_APPROVAL_REQUEST = "openloop.surface.post_approval_request"
    RESOLVE_APPROVAL_REQUEST = "openloop.surface.resolve_approval_request"
    PREPARE_APPROVAL = "openloop.approval.prepare"
    TASK_STARTED = "openloop.surface.task_started"
    MCP_LIST_TOOLS = "openloop.mcp.list_tools"
    MCP_CALL_TOOL = "openloop.mcp.call_tool"
    SKILL_LOAD = "openloop.skill.load"
    TEAMMATE_START = "openloop.agent.teammate_input"
    ADMISSION_ENTER = "openloop.admission.enter"
    ADMISSION_LEAVE = "openloop.admission.leave"
    ADMISSION_STILL_RUNNING = "openloop.admission.still_running"


class TaskStatus(StrEnum):
    QUEUED = "QUEUED"  # waiting for a slot under the agent's task limits
    RUNNING = "RUNNING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    WAITING_USER = "WAITING_USER"
    WAITING_BUDGET = "WAITING_BUDGET"
    SUCCESS = "SUCCESS"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    NO_PROGRESS = "NO_PROGRESS"
    APPROVAL_DENIED = "APPROVAL_DENIED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    CANCELLED = "CANCELLED"
    ERROR = "ERROR"

    @property
    def finished(self) -> bool:
        return self not in (
            TaskStatus.QUEUED,
            TaskStatus.RUNNING,
            TaskStatus.WAITING_APPROVAL,
            TaskStatus.WAITING_USER,
            TaskStatus.WAITING_BUDGET,
        )


@dataclass(frozen=True)
class SurfaceContext:
    """Where a task came from and where it answers."""

    surface: str  # "cli" | "slack" | "github"
    channel: str  # Slack channel id, "owner/repo", or a CLI channel name
    user: str  # the requesting user's id on that surface
    thread: str | None = None  # Slack thread_ts, issue/PR number
    event_id: str | None = None  # the triggering event (Slack event_id, GitHub delivery id)
    reply_target: str | None = None  # surface-specific extra (e.g. a commit sha to comment on)


@dataclass
class BudgetUsage:
    """What a task has spent; workflow state, carried across continue-as-new."""

    iterations: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    extra_usd: float = 0.0  # raised by extend_budget
    extra_tokens: int = 0
    extra_iterations: int = 0
    waited_seconds: float = 0.0  # time spent waiting on humans; not counted as wall clock

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
