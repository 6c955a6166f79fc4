"""Types that cross the workflow boundary: workflow input/result, signals, queries, activity I/O.

Client, workflow, activities, worker and surfaces all import these; none redefines them.
Temporal encourages one dataclass input per workflow/activity so fields can be added
compatibly: add fields with defaults, never rename or remove one that has been released.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer, model_validator

from config.agent import AgentConfig
from workflows.tool_catalog import ToolSpec

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
    TASK_STARTED = "openloop.surface.task_started"


class TaskStatus(StrEnum):
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
    # The specs of the agent's tools, fixed when the task starts (None: started before specs
    # rode in the input; such a task keeps `workflows.tool_catalog_v1`).
    tools: list[ToolSpec] | None = None


@dataclass
class TaskResult:
    task_id: str
    status: TaskStatus
    reason: str
    next_action: str
    reply: str
    usage: BudgetUsage
    steps: int


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; may be invalid


@dataclass
class ChatMessage:
    role: str  # system | user | assistant | tool
    content: str
    tool_call_id: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    content_ref: str | None = None  # full content stored elsewhere (large tool output)


@dataclass
class ModelUsage:
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


@dataclass
class TranscriptView:
    """How the model activity builds the prompt from the stored transcript."""

    summary_upto: int = 0  # messages up to here are replaced by the stored summary
    keep_tool_results: int = 6  # older tool results become short placeholders


@dataclass
class TranscriptCursor:
    """Where a model call stands in the stored transcript: the messages already stored (up to
    `upto`), the ones this call appends after them, and how the prompt is built from it all."""

    upto: int
    new_messages: list[ChatMessage] = field(default_factory=list)
    view: TranscriptView = field(default_factory=TranscriptView)


@dataclass
class BudgetGrant:
    """What one model call may spend, decided by the workflow just before it."""

    max_tokens: int  # output tokens, already clamped to the task's ceilings
    usd_headroom: float  # USD left under the task's ceiling
    token_headroom: int  # tokens (prompt and answer) left under the task's ceiling
    on_exceeded: str = "block"  # block | warn (spec.budget.on_exceeded)
    monthly_usd: float | None = None  # the agent's monthly cap: reserve from its budget workflow
    channel_monthly_usd: float | None = None  # the monthly cap of each channel it serves


# The shape ModelCallInput had before its fields were grouped, in its positional order.
# Histories recorded then hold it, and callers may still pass it: both are lifted into the
# groups on validation. Permanent: payloads of this shape stay in histories.
_FLAT_BUDGET_FIELDS = (
    "max_tokens",
    "usd_headroom",
    "token_headroom",
    "on_exceeded",
    "monthly_usd",
    "channel_monthly_usd",
)
_FLAT_CURSOR_FIELDS = {"transcript_upto": "upto", "new_messages": "new_messages", "view": "view"}
_FLAT_ORDER = (
    "task_id",
    "step",
    "agent_name",
    "workspace",
    "channel",
    "surface",
    "models",
    "transcript_upto",
    "new_messages",
    "tool_names",
    "max_tokens",
    "usd_headroom",
    "token_headroom",
    "on_exceeded",
    "view",
    "purpose",
    "timeout_seconds",
    "monthly_usd",
    "channel_monthly_usd",
    "run_first",
)


class ModelCallInput(BaseModel):
    """One model call: appends the cursor's new messages to the stored transcript, then asks
    the model within the budget grant.

    A pydantic model (not a dataclass) so the flat shape recorded in older histories still
    decodes: a before-validator lifts the flat fields into `cursor` and `budget`. Fields that
    are None are left out of the encoded payload, which keeps history small.
    """

    task_id: str
    step: int
    agent_name: str
    workspace: str
    channel: str
    surface: str
    models: list[str]
    tool_names: list[str]
    cursor: TranscriptCursor
    budget: BudgetGrant
    purpose: str = "step"  # step | summary | final
    timeout_seconds: float = 120.0
    run_first: FoldedTools | None = None  # tool calls whose results precede the new messages
    context_window: int | None = None  # the agent's model_policy.context_window, when it sets one

    def __init__(self, *args: Any, **data: Any) -> None:
        # Positional arguments follow the flat order of the released dataclass.
        if len(args) > len(_FLAT_ORDER):
            raise TypeError(f"ModelCallInput takes at most {len(_FLAT_ORDER)} positional arguments")
        super().__init__(**dict(zip(_FLAT_ORDER, args, strict=False)), **data)

    @model_validator(mode="before")
    @classmethod
    def _lift_flat_fields(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        budget = {name: data[name] for name in _FLAT_BUDGET_FIELDS if name in data}
        cursor = {new: data[old] for old, new in _FLAT_CURSOR_FIELDS.items() if old in data}
        if not budget and not cursor:
            return data
        if (budget and "budget" in data) or (cursor and "cursor" in data):
            raise ValueError("give either the grouped fields (budget, cursor) or the flat ones, not both")
        lifted = {
            k: v for k, v in data.items() if k not in _FLAT_BUDGET_FIELDS and k not in _FLAT_CURSOR_FIELDS
        }
        if budget:
            lifted["budget"] = budget
        if cursor:
            lifted["cursor"] = cursor
        return lifted

    @model_serializer(mode="wrap")
    def _leave_out_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        encoded: dict[str, Any] = handler(self)
        encoded["budget"] = {k: v for k, v in encoded["budget"].items() if v is not None}
        return {k: v for k, v in encoded.items() if v is not None}

    # Read-only views of the flat names, for readers written against the flat shape
    # (telemetry, scripted test models, bench); new code reads `cursor` and `budget`.
    @property
    def transcript_upto(self) -> int:
        return self.cursor.upto

    @property
    def new_messages(self) -> list[ChatMessage]:
        return self.cursor.new_messages

    @property
    def view(self) -> TranscriptView:
        return self.cursor.view

    @property
    def max_tokens(self) -> int:
        return self.budget.max_tokens

    @property
    def usd_headroom(self) -> float:
        return self.budget.usd_headroom

    @property
    def token_headroom(self) -> int:
        return self.budget.token_headroom

    @property
    def on_exceeded(self) -> str:
        return self.budget.on_exceeded

    @property
    def monthly_usd(self) -> float | None:
        return self.budget.monthly_usd

    @property
    def channel_monthly_usd(self) -> float | None:
        return self.budget.channel_monthly_usd


@dataclass
class ModelCallResult:
    text: str
    tool_calls: list[ToolCall]
    finish_reason: str  # stop | tool_calls | length | budget
    usage: ModelUsage
    transcript_upto: int
    max_tokens_used: int
    offline: bool = False
    refused_reason: str | None = None  # set when the budget could not cover the call
    refused_resumable: bool = True  # False: an extension of the task's budget cannot help
    tool_results: list[ToolCallResult] = field(default_factory=list)  # of run_first, in order


@dataclass
class MemoryScopeRef:
    workspace: str
    agent: str
    scope: str  # channel | agent | workspace
    scope_key: str
    embedding: str
    retention_days: int


@dataclass
class ApprovalRecord:
    request_id: str
    action_id: str
    approver: str
    decided_at_iso: str


@dataclass
class ToolCallInput:
    task_id: str
    step: int
    call_id: str
    tool: str
    arguments: dict[str, object]
    idempotency_key: str
    context: SurfaceContext
    memory: MemoryScopeRef
    requested_by: str
    approval: ApprovalRecord | None = None

    @classmethod
    def for_call(
        cls,
        task_id: str,
        step: int,
        call_id: str,
        tool: str,
        arguments: dict[str, object],
        context: SurfaceContext,
        memory: MemoryScopeRef,
        approval: ApprovalRecord | None = None,
    ) -> ToolCallInput:
        return cls(
            task_id=task_id,
            step=step,
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            idempotency_key=f"{task_id}:{step}:{call_id}",  # one call, one effect
            context=context,
            memory=memory,
            requested_by=context.user,
            approval=approval,
        )


@dataclass
class FoldedToolCall:
    """A read-only local tool call (no approval needed) that the next model activity runs
    before it asks the model: its result reaches the model without a round trip of its own."""

    step: int
    call_id: str
    tool: str
    arguments: dict[str, object]


@dataclass
class FoldedTools:
    calls: list[FoldedToolCall]
    context: SurfaceContext
    memory: MemoryScopeRef

    def inputs(self, task_id: str) -> list[ToolCallInput]:
        return [
            ToolCallInput.for_call(task_id, c.step, c.call_id, c.tool, c.arguments, self.context, self.memory)
            for c in self.calls
        ]


@dataclass
class ToolCallResult:
    ok: bool
    output: str  # bounded preview of the output, or the error for the model
    output_ref: str | None = None  # the full output when it was too large for history
    error_kind: str | None = None  # not_found | invalid | permission | failed


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


@dataclass
class AuditEvent:
    task_id: str
    step: int
    key: str  # idempotency: one row per (task_id, key)
    agent: str
    workspace: str
    channel: str
    kind: str  # tool_refused | approval_requested | approval_granted | approval_denied | ...
    actor: str
    tool: str | None = None
    arguments: dict[str, object] | None = None
    outcome: str = ""
    approver: str | None = None


@dataclass
class PostReplyInput:
    task_id: str
    context: SurfaceContext
    text: str
    status: TaskStatus
    step: int


@dataclass
class ApprovalRequest:
    """Shown to approvers and held in workflow state while the task waits."""

    request_id: str
    action_id: str
    tool: str
    arguments: dict[str, object]
    approvers: list[str]
    requested_at_iso: str
    expires_at_iso: str
    model: str
    estimated_cost_usd: float


@dataclass
class PostApprovalRequestInput:
    task_id: str
    context: SurfaceContext
    request: ApprovalRequest
    agent_name: str


@dataclass
class PostApprovalRequestResult:
    message_ref: str | None = None  # e.g. Slack channel:ts, to update when decided


@dataclass
class ResolveApprovalRequestInput:
    task_id: str
    context: SurfaceContext
    request: ApprovalRequest
    message_ref: str | None
    outcome: str  # approved | denied | expired | cancelled
    decided_by: str | None
    decided_at_iso: str


# Signals and queries -------------------------------------------------------------------


@dataclass(frozen=True)
class ApprovalDecision:
    request_id: str
    action_id: str
    approver: str
    note: str = ""


@dataclass(frozen=True)
class UserMessage:
    user: str
    text: str


@dataclass(frozen=True)
class CancelRequest:
    by: str
    reason: str = ""


@dataclass(frozen=True)
class BudgetExtension:
    by: str
    usd: float = 0.0
    tokens: int = 0
    iterations: int = 0


@dataclass
class StepRecord:
    step: int
    kind: str  # model | tool | approval | refused | stop | message
    summary: str
    at_iso: str
    cost_usd: float = 0.0
    actor: str | None = None


@dataclass
class TaskStatusView:
    task_id: str
    agent: str
    status: TaskStatus
    step: int
    last_action: str
    usage: BudgetUsage
    limits: dict[str, float]
    pending_approval: ApprovalRequest | None
    reply: str


@dataclass
class Explanation:
    task_id: str
    status: TaskStatus
    reason: str
    next_action: str
    steps: list[StepRecord]
    decisions: list[str]


# ModelCallInput names FoldedTools, defined after it.
ModelCallInput.model_rebuild()
