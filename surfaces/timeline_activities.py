"""What a finished activity tells in a task's timeline: a tool's run, an approval asked or
decided, a reply, a model answer, a failure."""

from __future__ import annotations

from datetime import datetime

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import ActivityTaskScheduledEventAttributes, HistoryEvent

from surfaces.timeline_entries import Entry, EntryKind, parse_iso
from surfaces.timeline_entries import decode as _decode
from workflows.mcp_types import McpCallInput
from workflows.types import (
    ActivityName,
    ModelCallResult,
    PostApprovalRequestInput,
    PostReplyInput,
    ResolveApprovalRequestInput,
    ToolCallInput,
    ToolCallResult,
)

E = EventType


def completed(scheduled: HistoryEvent, result: Payloads, at: datetime) -> Entry | None:
    """The entry of a finished activity other than a model call."""
    attrs = scheduled.activity_task_scheduled_event_attributes
    name = attrs.activity_type.name
    if name in (ActivityName.RUN_TOOL, ActivityName.MCP_CALL_TOOL):
        tool_in, tool_out = tool_input(attrs), _decode(result, ToolCallResult)
        if tool_in is None:
            return None
        who = tool_in.approval.approver if tool_in.approval else None
        return tool_entry(at, tool_in.tool, tool_out, tool_in.step, who)
    if name == ActivityName.POST_APPROVAL_REQUEST:
        asked = _decode(attrs.input, PostApprovalRequestInput)
        if asked is None:
            return None
        approvers = ", ".join(asked.request.approvers) or "any approver"
        return Entry(at, EntryKind.APPROVAL, f"asked {approvers} to approve {asked.request.tool}")
    if name == ActivityName.RESOLVE_APPROVAL_REQUEST:
        decided = _decode(attrs.input, ResolveApprovalRequestInput)
        if decided is None:
            return None
        when = parse_iso(decided.decided_at_iso) or at
        by = f" by {decided.decided_by}" if decided.decided_by else ""
        what = f"{decided.request.tool} {decided.outcome}{by}"
        return Entry(when, EntryKind.APPROVAL, what, who=decided.decided_by)
    if name == ActivityName.POST_REPLY:
        reply = _decode(attrs.input, PostReplyInput)
        if reply is None:
            return None
        text = reply.text.strip().replace("\n", " ")[:100]
        return Entry(at, EntryKind.REPLY, f"{reply.status.value}: {text}", step=reply.step)
    return None


def tool_entry(
    at: datetime, tool: str, out: ToolCallResult | None, step: int | None, who: str | None = None
) -> Entry:
    outcome = "ok" if out is None or out.ok else (out.error_kind or "failed")
    preview = (out.output[:100] if out else "").replace("\n", " ")
    return Entry(at, EntryKind.TOOL, f"{tool}: {outcome}: {preview}", step=step, who=who)


def tool_input(attrs: ActivityTaskScheduledEventAttributes) -> ToolCallInput | None:
    """The call a native or MCP tool activity ran; None for any other activity."""
    if attrs.activity_type.name == ActivityName.MCP_CALL_TOOL:
        mcp = _decode(attrs.input, McpCallInput)
        return mcp.call if mcp is not None else None
    if attrs.activity_type.name == ActivityName.RUN_TOOL:
        return _decode(attrs.input, ToolCallInput)
    return None


def model_entry(at: datetime, out: ModelCallResult, step: int | None) -> Entry:
    usage = out.usage
    did = f"{len(out.tool_calls)} tool call(s)" if out.tool_calls else f"answered ({out.finish_reason})"
    if out.tool_calls:
        did += ": " + ", ".join(call.name.replace("__", ".") for call in out.tool_calls)
    what = f"{usage.model}: {did}; {usage.prompt_tokens}+{usage.completion_tokens} tokens"
    return Entry(at, EntryKind.MODEL, what, step=step, cost_usd=usage.cost_usd)


def activity_failed(event: HistoryEvent, scheduled: dict[int, HistoryEvent], at: datetime) -> Entry:
    if event.event_type == E.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        failed = event.activity_task_failed_event_attributes
        started, message = scheduled.get(failed.scheduled_event_id), failed.failure.message
    else:
        timed_out = event.activity_task_timed_out_event_attributes
        started, message = scheduled.get(timed_out.scheduled_event_id), timed_out.failure.message
    name = started.activity_task_scheduled_event_attributes.activity_type.name if started else "activity"
    return Entry(at, EntryKind.FAILURE, f"{name} failed: {message}")
