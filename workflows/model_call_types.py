"""The model activity's input and result: where the call stands in the stored transcript, what
it may spend, and what the model answered. What every call of a task shares is stored once
per run instead (`workflows.task_constants`). Older inputs (flat, or carrying the constants)
still decode and still run (see below)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, PrivateAttr, SerializerFunctionWrapHandler, model_serializer, model_validator

from workflows.model_call_flat import FLAT_ORDER, lift_flat_fields
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
class StreamTarget:
    """Where a model call streams its answer as it is written: a Slack thread, shown to the
    person who asked (Slack needs the recipient outside DMs; no team: the bot's own)."""

    channel: str
    thread_ts: str
    recipient_user: str
    recipient_team: str | None = None


@dataclass
class BudgetGrant:
    """What one model call may spend, decided by the workflow just before it."""

    max_tokens: int  # output tokens, already clamped to the task's ceilings
    usd_headroom: float  # USD left under the task's ceiling
    token_headroom: int  # tokens (prompt and answer) left under the task's ceiling
    # The caps below are the task's constants: an input that leaves them to the task's row
    # (TaskConstants) sends None; older inputs carry them.
    on_exceeded: str | None = None  # block | warn (spec.budget.on_exceeded); None reads as block
    monthly_usd: float | None = None  # the agent's monthly cap: reserve from its budget workflow
    channel_monthly_usd: float | None = None  # the monthly cap of each channel it serves


class ModelCallInput(BaseModel):
    """One model call: appends the cursor's new messages to the stored transcript, then asks
    the model within the budget grant.

    A pydantic model (not a dataclass) so the flat shape recorded in older histories still
    decodes: a before-validator lifts the flat fields into `cursor` and `budget`. Fields that
    are None are left out of the encoded payload, which keeps history small.

    Two shapes run. Inputs of tasks that stored their TaskConstants leave agent_name through
    context_window (and the budget's caps) out: the activity reads them from the task's row
    (`use_stored`), and `model` names the route's first model for people reading the history.
    Inputs of tasks started before that (no row) carry them all, as they always did. Either
    way readers go through `task`, `route`, `offered_tools` and `folded_inputs`.
    """

    task_id: str
    step: int
    cursor: TranscriptCursor
    budget: BudgetGrant
    agent_name: str | None = None  # None: the task's row holds the constants
    workspace: str | None = None
    channel: str | None = None
    surface: str | None = None
    models: list[str] | None = None  # None: the task's route for this purpose
    model: str | None = None  # the route's first model, for the Web UI (not read by the activity)
    tool_names: list[str] | None = None  # None: the task's tools
    purpose: str = "step"  # step | summary | final
    timeout_seconds: float = 120.0
    run_first: FoldedTools | None = None  # tool calls whose results precede the new messages
    fold: list[FoldedToolCall] | None = None  # the same, acting where the task's row says
    context_window: int | None = None  # the agent's model_policy.context_window, when it sets one
    stream: StreamTarget | None = None  # stream the answer's text there while it is written
    _stored: TaskConstants | None = PrivateAttr(default=None)

    def __init__(self, *args: Any, **data: Any) -> None:
        # Positional arguments follow the flat order of the released dataclass.
        if len(args) > len(FLAT_ORDER):
            raise TypeError(f"ModelCallInput takes at most {len(FLAT_ORDER)} positional arguments")
        super().__init__(**dict(zip(FLAT_ORDER, args, strict=False)), **data)

    @model_validator(mode="before")
    @classmethod
    def _lift_flat_fields(cls, data: Any) -> Any:
        return lift_flat_fields(data)

    @model_serializer(mode="wrap")
    def _leave_out_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        encoded: dict[str, Any] = handler(self)
        encoded["budget"] = {k: v for k, v in encoded["budget"].items() if v is not None}
        return {k: v for k, v in encoded.items() if v is not None}

    # The task's constants: carried by older inputs, else read from the task's row.

    @property
    def carries_constants(self) -> bool:
        return self.agent_name is not None

    def use_stored(self, constants: TaskConstants | None) -> None:
        """Attach the task's stored constants (the activity read them for this call)."""
        self._stored = constants

    def task_or_none(self) -> TaskConstants | None:
        if not self.carries_constants:
            return self._stored
        grant = self.budget
        folded = self.run_first
        return TaskConstants(
            agent_name=self.agent_name or "",
            workspace=self.workspace or "",
            channel=self.channel or "",
            surface=self.surface or "",
            models=list(self.models or []),
            summary_models=list(self.models or []),
            tool_names=list(self.tool_names or []),
            on_exceeded=grant.on_exceeded or "block",
            monthly_usd=grant.monthly_usd,
            channel_monthly_usd=grant.channel_monthly_usd,
            context_window=self.context_window,
            context=folded.context if folded else None,
            memory=folded.memory if folded else None,
        )

    @property
    def task(self) -> TaskConstants:
        """The task's constants for this call; LookupError when neither the input nor a stored
        row gives them."""
        constants = self.task_or_none()
        if constants is None:
            raise LookupError(f"task {self.task_id}: no stored constants, and the model call carries none")
        return constants

    @property
    def route(self) -> list[str]:
        """The models to try, in order."""
        if self.models is not None:
            return self.models
        task = self.task
        return task.summary_models if self.purpose == "summary" else task.models

    @property
    def offered_tools(self) -> list[str]:
        """The tools the model is offered."""
        return self.tool_names if self.tool_names is not None else self.task.tool_names

    @property
    def folded_calls(self) -> list[FoldedToolCall]:
        return self.run_first.calls if self.run_first else list(self.fold or [])

    def folded_inputs(self) -> list[ToolCallInput]:
        """The folded tool calls as the tool activity would take them."""
        if self.run_first:
            return self.run_first.inputs(self.task_id)
        if not self.fold:
            return []
        task = self.task
        if task.context is None or task.memory is None:
            raise LookupError(f"task {self.task_id}: folded tool calls, but no stored context to run them in")
        return FoldedTools(self.fold, task.context, task.memory).inputs(self.task_id)

    def resolved(self) -> ModelCallInput:
        """A copy that carries the task's constants itself (the older shape): the call as the
        activity sees it once it has read the task's row."""
        task = self.task
        folded = self.run_first
        if self.fold and task.context is not None and task.memory is not None:
            folded = FoldedTools(list(self.fold), task.context, task.memory)
        budget = BudgetGrant(
            self.budget.max_tokens,
            self.budget.usd_headroom,
            self.budget.token_headroom,
            task.on_exceeded,
            task.monthly_usd,
            task.channel_monthly_usd,
        )
        return self.model_copy(
            update={
                "agent_name": task.agent_name,
                "workspace": task.workspace,
                "channel": task.channel,
                "surface": task.surface,
                "models": list(self.route),
                "tool_names": list(self.offered_tools),
                "budget": budget,
                "run_first": folded,
                "fold": None,
                "context_window": task.context_window,
            }
        )

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
    finish_reason: str  # stop | tool_calls | length | budget
    usage: ModelUsage
    transcript_upto: int
    max_tokens_used: int
    offline: bool = False
    refused_reason: str | None = None  # set when the budget could not cover the call
    refused_resumable: bool = True  # False: an extension of the task's budget cannot help
    tool_results: list[ToolCallResult] = field(default_factory=list)  # of run_first, in order
    streamed_ts: str | None = None  # the Slack message the answer was streamed into, if any
