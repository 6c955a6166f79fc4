"""The model activity's input and result: where the call stands in the stored transcript, what
it may spend, and what the model answered. Older flat inputs still decode (see below)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer, model_validator

from workflows.tool_call_types import ChatMessage, FoldedTools, ToolCall, ToolCallResult


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
