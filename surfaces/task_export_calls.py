"""Model and tool calls of a task's history as export records (`surfaces.task_export_history`).

A tool call reaches the history four ways, each read here: as its own activity (its input
and result recorded), as a local activity (only its result recorded: the arguments are the
model answer's call it ran), folded into the next model call (run there before the model was
asked; its result comes back with the answer), or on a workspace's worker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from temporalio.api.common.v1 import Payloads
from temporalio.api.history.v1 import HistoryEvent

from activities.store.ledger import mask_secrets, mask_text
from surfaces.task_export_format import ModelCallRecord, ModelOutput, Record, ToolCallAsked, ToolCallRecord
from surfaces.timeline_entries import decode
from workers.history import event_time, local_activity_type
from workflows.code_types import CodeActivity, CodeToolInput, CodeToolResult
from workflows.mcp_types import McpCallInput
from workflows.types import (
    ActivityName,
    ModelCallInput,
    ModelCallResult,
    ToolCallInput,
    ToolCallResult,
    TranscriptView,
)

Ran = Literal["activity", "local", "folded", "workspace", "refused"]
Prompt = Callable[[int, TranscriptView], list[dict[str, Any]] | None]
_TOOL_ACTIVITIES = {ActivityName.RUN_TOOL, ActivityName.MCP_CALL_TOOL, CodeActivity.RUN_TOOL}


def at_of(when: datetime) -> str:
    """A record's time: UTC, microseconds, `Z` (sorts as text in time order)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def provider(model: str) -> str:
    """The provider named by the model string's prefix; LiteLLM's guess when it has none."""
    if "/" in model:
        return model.split("/", 1)[0]
    from activities.providers import provider_of  # imports LiteLLM: only for a bare name

    return provider_of(model)


def arguments_of(text: str) -> Any:
    """A model's tool-call arguments as an object, masked; the raw text when not JSON."""
    try:
        return mask_secrets(json.loads(text))
    except ValueError:
        return mask_text(text)


@dataclass
class Asked:
    call_id: str
    tool: str
    arguments: Any
    step: int


@dataclass
class Calls:
    """What completions refer to: scheduled and started activities, and the tool calls of
    the last model answer not yet run."""

    scheduled: dict[int, HistoryEvent] = field(default_factory=dict)
    started: dict[int, HistoryEvent] = field(default_factory=dict)
    asked: list[Asked] = field(default_factory=list)
    every: list[Asked] = field(default_factory=list)  # every call the model asked for, in order
    approved: dict[str, str | None] = field(default_factory=dict)  # by whom, per tool, till it runs

    def took_ms(self, started_event_id: int, ended: HistoryEvent) -> int | None:
        started = self.started.get(started_event_id)
        if started is None:
            return None
        return round((event_time(ended) - event_time(started)).total_seconds() * 1000)

    def attempt(self, started_event_id: int) -> int:
        started = self.started.get(started_event_id)
        return started.activity_task_started_event_attributes.attempt if started is not None else 1

    def ran(self, call_id: str) -> Asked | None:
        found = next((asked for asked in self.asked if asked.call_id == call_id), None)
        if found is not None:
            self.asked.remove(found)
        return found

    def local(self, task_id: str, event: HistoryEvent, at: str) -> list[Record]:
        """A local tool activity's marker: the next call of the model's answer (the marker's
        summary names its tool when set)."""
        if local_activity_type(event) != ActivityName.RUN_TOOL:
            return []
        out = decode(
            event.marker_recorded_event_attributes.details.get("result") or Payloads(), ToolCallResult
        )
        summary = event.user_metadata.summary.data.decode(errors="replace")
        candidates = [a for a in self.asked if f"run {a.tool}" in summary] or self.asked
        asked = self.ran(candidates[0].call_id) if candidates else None
        tool = asked.tool if asked else "tool"
        return [_tool_record(task_id, at, asked, tool, out, None, "local", self.approved.pop(tool, None))]

    def failed(self, task_id: str, event: HistoryEvent, at: str) -> list[Record]:
        """A tool activity that failed for good (its retries are not in the history)."""
        attrs = event.activity_task_failed_event_attributes
        scheduled = self.scheduled.get(attrs.scheduled_event_id)
        call = _tool_input(scheduled) if scheduled is not None else None
        if call is None:
            return []
        self.ran(call.call_id)
        failure = ToolCallResult(ok=False, output=attrs.failure.message, error_kind="activity_failed")
        took = self.took_ms(attrs.started_event_id, event)
        return [_tool_record(task_id, at, _from_input(call), call.tool, failure, took, "activity", None)]


def model_call(
    task_id: str,
    scheduled: HistoryEvent,
    result: Payloads,
    at: str,
    took: int | None,
    attempt: int,
    prompt: Prompt,
    calls: Calls,
) -> list[Record]:
    """The folded tool calls the model activity ran first, then the model call itself."""
    inp = decode(scheduled.activity_task_scheduled_event_attributes.input, ModelCallInput)
    out = decode(result, ModelCallResult)
    if inp is None or out is None:
        return []
    records: list[Record] = [
        _tool_record(
            task_id,
            at,
            Asked(c.call_id, c.tool, mask_secrets(c.arguments), c.step),
            c.tool,
            o,
            None,
            "folded",
            None,
        )
        for c, o in zip(inp.folded_calls, out.tool_results, strict=False)
    ]
    # A call refused by the budget asked nothing; else the prompt is built from the rows
    # before the answer, as the activity built it.
    messages = [] if out.finish_reason == "budget" else prompt(out.transcript_upto - 1, inp.cursor.view)
    asked = [ToolCallAsked(id=c.id, name=c.name, arguments=arguments_of(c.arguments)) for c in out.tool_calls]
    calls.asked = [
        Asked(c.id, c.name.replace("__", "."), a.arguments, inp.step)
        for c, a in zip(out.tool_calls, asked, strict=True)
    ]
    calls.every += calls.asked
    usage = out.usage
    records.append(
        ModelCallRecord(
            task_id=task_id,
            at=at,
            step=inp.step,
            purpose=inp.purpose,
            model=usage.model,
            provider=provider(usage.model),
            messages=messages,
            tools_offered=inp.tool_names,
            output=ModelOutput(text=mask_text(out.text), tool_calls=asked, finish_reason=out.finish_reason),
            tokens_in=usage.prompt_tokens,
            tokens_out=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            cost_usd=usage.cost_usd,
            latency_ms=took,
            offline=out.offline,
            attempt=attempt,
        )
    )
    return records


def tool_call(
    task_id: str, scheduled: HistoryEvent, result: Payloads, at: str, took: int | None, calls: Calls
) -> list[Record]:
    """A tool activity's record; none for any other activity."""
    call = _tool_input(scheduled)
    if call is None:
        return []
    calls.ran(call.call_id)
    calls.approved.pop(call.tool, None)
    workspace = scheduled.activity_task_scheduled_event_attributes.activity_type.name == CodeActivity.RUN_TOOL
    if workspace:
        done = decode(result, CodeToolResult)
        out = done.result if done is not None else None
    else:
        out = decode(result, ToolCallResult)
    approved_by = call.approval.approver if call.approval else None
    ran: Ran = "workspace" if workspace else "activity"
    return [_tool_record(task_id, at, _from_input(call), call.tool, out, took, ran, approved_by)]


def _tool_input(scheduled: HistoryEvent) -> ToolCallInput | None:
    attrs = scheduled.activity_task_scheduled_event_attributes
    name = attrs.activity_type.name
    if name not in _TOOL_ACTIVITIES:
        return None
    if name == ActivityName.MCP_CALL_TOOL:
        mcp = decode(attrs.input, McpCallInput)
        return mcp.call if mcp is not None else None
    if name == CodeActivity.RUN_TOOL:
        code = decode(attrs.input, CodeToolInput)
        return code.call if code is not None else None
    return decode(attrs.input, ToolCallInput)


def _from_input(call: ToolCallInput) -> Asked:
    return Asked(call.call_id, call.tool, mask_secrets(call.arguments), call.step)


def _tool_record(
    task_id: str,
    at: str,
    asked: Asked | None,
    tool: str,
    out: ToolCallResult | None,
    took: int | None,
    ran: Ran,
    approved_by: str | None,
) -> ToolCallRecord:
    return ToolCallRecord(
        task_id=task_id,
        at=at,
        step=asked.step if asked else None,
        call_id=asked.call_id if asked else None,
        tool=tool,
        arguments=asked.arguments if asked else None,
        ok=out.ok if out is not None else False,
        error_kind=out.error_kind if out is not None else "unreadable",
        result=mask_text(out.output) if out is not None else "",
        result_ref=out.output_ref if out is not None else None,
        duration_ms=took,
        ran=ran,
        approved_by=approved_by,
    )


def masked_message(message: dict[str, Any]) -> dict[str, Any]:
    """A provider message with its secrets masked, a tool call's JSON arguments by key too."""
    masked: dict[str, Any] = mask_secrets({k: v for k, v in message.items() if k != "tool_calls"})
    if message.get("tool_calls"):
        masked["tool_calls"] = [
            {**call, "function": {**call["function"], "arguments": masked_arguments_text(call["function"])}}
            for call in message["tool_calls"]
        ]
    return masked


def masked_arguments_text(function: dict[str, Any]) -> str:
    text = str(function.get("arguments") or "")
    try:
        parsed = json.loads(text)
    except ValueError:
        return mask_text(text)
    return json.dumps(mask_secrets(parsed), ensure_ascii=False)
