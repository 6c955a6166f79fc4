"""The model activity's input and result: where the call stands in the stored transcript, what
it may spend, and what the model answered. What every call of a task shares is stored once
per run instead (`workflows.task_constants`) and read by the activity."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, PrivateAttr, SerializerFunctionWrapHandler, model_serializer

from workflows.task_constants import TaskConstants
from workflows.tool_call_types import (
    ChatMessage,
    FoldedToolCall,
    FoldedTools,
    ToolCall,
    ToolCallInput,
    ToolCallResult,
)


@dataclass
class ModelUsage:
    model: str
    prompt_tokens: int  # every input token, cached ones included
    completion_tokens: int  # every output token, reasoning ones included
    cost_usd: float
    cached_tokens: int = 0  # input read from the provider's prompt cache (priced lower)
    cache_write_tokens: int = 0  # input written to it (priced higher, by some providers)
    reasoning_tokens: int = 0  # output the model thought with and did not show


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
class StreamTarget:
    """Where a model call streams its answer as it is written: a Slack thread, shown to the
    person who asked (Slack needs the recipient outside DMs; no team: the bot's own)."""

    channel: str
    thread_ts: str
    recipient_user: str
    recipient_team: str | None = None


@dataclass
class BudgetGrant:
    """What one model call may spend, decided by the workflow just before it (the task's caps,
    `on_exceeded` and the monthly ones, are its constants)."""

    max_tokens: int  # output tokens, already clamped to the task's ceilings
    usd_headroom: float  # USD left under the task's ceiling
    token_headroom: int  # tokens (prompt and answer) left under the task's ceiling


class ModelCallInput(BaseModel):
    """One model call: appends the cursor's new messages to the stored transcript, then asks
    the model within the budget grant.

    Only what differs between the calls of a task rides here; the rest (agent, routes, tools,
    caps, where folded tool calls act) is the task's row of constants, which the activity
    reads and attaches (`use_stored`) before anyone reads `task`, `route`, `offered_tools` or
    `folded_inputs`. A pydantic model so fields that are None are left out of the encoded
    payload, which keeps history small.
    """

    task_id: str
    step: int
    cursor: TranscriptCursor
    budget: BudgetGrant
    purpose: str = "step"  # step | summary | final
    model: str | None = None  # the route's first model, for the Web UI (not read by the activity)
    tool_names: list[str] | None = None  # None: the task's tools ([] for a call without tools)
    timeout_seconds: float = 120.0
    fold: list[FoldedToolCall] | None = None  # tool calls whose results precede the new messages
    stream: StreamTarget | None = None  # stream the answer's text there while it is written
    _stored: TaskConstants | None = PrivateAttr(default=None)

    @model_serializer(mode="wrap")
    def _leave_out_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        encoded: dict[str, Any] = handler(self)
        return {k: v for k, v in encoded.items() if v is not None}

    def use_stored(self, constants: TaskConstants | None) -> None:
        """Attach the task's stored constants (the activity read them for this call)."""
        self._stored = constants

    def task_or_none(self) -> TaskConstants | None:
        return self._stored

    @property
    def task(self) -> TaskConstants:
        """The task's constants for this call; LookupError until the activity attached them."""
        if self._stored is None:
            raise LookupError(f"task {self.task_id}: no stored constants attached to the model call")
        return self._stored

    @property
    def route(self) -> list[str]:
        """The models to try, in order."""
        return self.task.summary_models if self.purpose == "summary" else self.task.models

    @property
    def offered_tools(self) -> list[str]:
        """The tools the model is offered."""
        return self.tool_names if self.tool_names is not None else self.task.tool_names

    @property
    def folded_calls(self) -> list[FoldedToolCall]:
        return list(self.fold or [])

    def folded_inputs(self) -> list[ToolCallInput]:
        """The folded tool calls as the tool activity would take them."""
        if not self.fold:
            return []
        task = self.task
        if task.context is None or task.memory is None:
            raise LookupError(f"task {self.task_id}: folded tool calls, but no stored context to run them in")
        return FoldedTools(self.fold, task.context, task.memory).inputs(self.task_id)

    # Short names for readers (telemetry, scripted test models, bench).

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
        return self.task.on_exceeded

    @property
    def monthly_usd(self) -> float | None:
        return self.task.monthly_usd

    @property
    def channel_monthly_usd(self) -> float | None:
        return self.task.channel_monthly_usd


@dataclass
class ModelCallResult:
    text: str
    tool_calls: list[ToolCall]
    finish_reason: str  # stop | tool_calls | length | budget | refused | empty
    usage: ModelUsage
    transcript_upto: int
    max_tokens_used: int
    offline: bool = False
    refused_reason: str | None = None  # set when the budget could not cover the call
    refused_resumable: bool = True  # False: an extension of the task's budget cannot help
    tool_results: list[ToolCallResult] = field(default_factory=list)  # of the folded calls, in order
    streamed_ts: str | None = None  # the Slack message the answer was streamed into, if any
    # What the provider said of an answer with nothing in it: its own finish reason
    # (`content_filter`, `end_turn`…) and any refusal text.
    provider_finish: str = ""
    refusal: str = ""
    context_window: int = 0  # the prompt tokens the answering model takes (0: not known)
