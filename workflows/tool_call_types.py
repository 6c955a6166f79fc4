"""What crosses the boundary for one tool call: the model's call, the messages of a
conversation, and the tool activity's input and result (folded calls included)."""

from __future__ import annotations

from dataclasses import dataclass, field

from workflows.task_basics import SurfaceContext


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
