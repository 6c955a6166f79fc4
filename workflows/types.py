"""Types that cross the workflow boundary: workflow input/result, signals, queries, activity I/O.

Client, workflow, activities, worker and surfaces all import these from here; none redefines
them. The families live in `task_basics`, `tool_call_types`, `model_call_types` and
`message_types`; this module defines the task's own input and result and re-exports the rest.
Temporal encourages one dataclass input per workflow/activity so fields can be added
compatibly: add fields with defaults, never rename or remove one that has been released.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.agent import AgentConfig
from workflows.code_types import WorkspaceState
from workflows.loop_types import LOOP_TASK_QUEUE
from workflows.message_types import (
    DECIDE_UPDATE,
    DECISION_REFUSED,
    ApprovalDecision,
    ApprovalRequest,
    AuditEvent,
    BudgetExtension,
    CancelRequest,
    Decision,
    DecisionVerdict,
    Explanation,
    PostApprovalRequestInput,
    PostApprovalRequestResult,
    PostReplyInput,
    ResolveApprovalRequestInput,
    StepRecord,
    TaskStatusView,
    UserMessage,
)
from workflows.model_call_types import (
    BudgetGrant,
    ModelCallInput,
    ModelCallResult,
    ModelUsage,
    StreamTarget,
    TranscriptCursor,
    TranscriptView,
)
from workflows.task_basics import WORKFLOW_NAME, ActivityName, BudgetUsage, SurfaceContext, TaskStatus
from workflows.tool_call_types import (
    ApprovalRecord,
    ChatMessage,
    FoldedToolCall,
    FoldedTools,
    MemoryScopeRef,
    ToolCall,
    ToolCallInput,
    ToolCallResult,
)
from workflows.tool_catalog import ToolSpec

__all__ = [
    "ActivityName",
    "ApprovalDecision",
    "ApprovalRecord",
    "ApprovalRequest",
    "AuditEvent",
    "BudgetExtension",
    "BudgetGrant",
    "BudgetUsage",
    "CancelRequest",
    "CarriedState",
    "ChatMessage",
    "DECIDE_UPDATE",
    "DECISION_REFUSED",
    "Decision",
    "DecisionVerdict",
    "Explanation",
    "FoldedToolCall",
    "FoldedTools",
    "MemoryItem",
    "MemoryScopeRef",
    "ModelCallInput",
    "ModelCallResult",
    "ModelUsage",
    "PostApprovalRequestInput",
    "PostApprovalRequestResult",
    "PostReplyInput",
    "RecallInput",
    "RecallResult",
    "SkillRef",
    "ResolveApprovalRequestInput",
    "StepRecord",
    "SurfaceContext",
    "TaskInput",
    "TaskResult",
    "TaskStatus",
    "TaskStatusView",
    "ToolCall",
    "ToolCallInput",
    "ToolCallResult",
    "TranscriptCursor",
    "StreamTarget",
    "TranscriptView",
    "UserMessage",
    "WORKFLOW_NAME",
]


@dataclass
class CarriedState:
    """State handed to the next run on continue-as-new."""

    step: int
    transcript_upto: int
    usage: BudgetUsage
    started_at_iso: str
    decisions: list[str]
    pending_messages: list[ChatMessage]
    progress_signatures: list[str]
    used_request_ids: list[str]
    summary_upto: int = 0
    continuations: int = 0
    runs: int = 1
    folded_tools: list[FoldedToolCall] = field(default_factory=list)
    workspace: WorkspaceState | None = None


@dataclass(frozen=True)
class SkillRef:
    """A skill version a task started with; it reads exactly this content."""

    name: str
    version: int
    sha256: str
    description: str
    # Its `allowed-tools`: once loaded, the task offers only these of its tools (never more).
    allowed_tools: tuple[str, ...] = ()


@dataclass
class TaskInput:
    """Everything a task needs, fixed when it starts (the agent is a snapshot of one version)."""

    task_id: str
    agent: AgentConfig
    agent_version: int
    context: SurfaceContext
    request: str
    task_kind: str = "chat"
    carried: CarriedState | None = None
    max_steps_per_run: int = 200
    follow_up_seconds: float = 3600.0  # after a question, how long the task waits for an answer
    # The specs of the agent's tools, fixed when the task starts: a surface takes them from
    # the catalog (`activities.tools.catalog.specs_for`), a child from its parent.
    tools: list[ToolSpec] = field(default_factory=list)
    skills: list[SkillRef] = field(default_factory=list)  # the versions it keeps, named in the prompt
    parent: str | None = None  # a subagent's parent task: it answers the parent, not the surface
    # A workspace the task starts with (a repair loop's, lent to its fixer); others open one
    # with code.open_workspace, taken on this queue of loop workers.
    workspace: WorkspaceState | None = None
    loop_queue: str = LOOP_TASK_QUEUE
    # The agents of the tasks above this one, the root's first (a subagent repeats its
    # parent's): no agent is asked by a task below it, and the tree's depth is its length.
    ancestors: list[str] = field(default_factory=list)
    # A playbook step's declared output as a JSON schema: asked of the model in the
    # provider's structured-output mode where it has one.
    output_schema: dict[str, Any] | None = None


@dataclass
class TaskResult:
    task_id: str
    status: TaskStatus
    reason: str
    next_action: str
    reply: str
    usage: BudgetUsage
    steps: int


@dataclass
class RecallInput:
    memory: MemoryScopeRef
    query: str
    k: int
    task_id: str


@dataclass
class MemoryItem:
    id: str
    content: str
    created_at_iso: str
    score: float = 0.0
    source_task_id: str = ""  # the task that saved it


@dataclass
class RecallResult:
    items: list[MemoryItem]
