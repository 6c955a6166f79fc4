"""A task's story, step by step, read from its workflow history.

Pure functions over recorded data (no client calls), so `openloop tasks show` and
`openloop explain` read finished tasks without a worker, and tests can check them directly.
The history is the source of truth for what happened and when: model calls with their
tokens and cost, tool calls, approvals with who decided and when, signals, status changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import ActivityTaskScheduledEventAttributes, HistoryEvent
from temporalio.converter import decode_search_attributes

from surfaces.timeline_activities import activity_failed, completed, model_entry, tool_entry, tool_input
from surfaces.timeline_approvals import VoidedApprovals, mcp_problems, tell_what_followed
from surfaces.timeline_children import CHILD_EVENTS, child_wait, read_child_event
from surfaces.timeline_code import CODE_ACTIVITIES, CodeSteps
from surfaces.timeline_entries import Entry, EntryKind, Story, parse_iso
from surfaces.timeline_entries import decode as _decode
from surfaces.timeline_signals import GateView, signal_entry, update_entry
from workers.history import event_time, local_activity_type
from workflows import search
from workflows.code_types import CodeActivity, CodeToolInput, CodeToolResult
from workflows.loop_types import LoopActivity
from workflows.mcp_types import McpListResult
from workflows.message_types import PrepareApprovalResult
from workflows.types import (
    ActivityName,
    ModelCallInput,
    ModelCallResult,
    PostApprovalRequestInput,
    RecallResult,
    ResolveApprovalRequestInput,
    TaskInput,
    TaskResult,
    ToolCallResult,
)

__all__ = ["Entry", "EntryKind", "Story", "parse_iso", "story_from_history"]

E = EventType

_CLOSED = {
    E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "failed",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "terminated",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "cancelled from Temporal",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "timed out",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "continued as a new run",
}


def story_from_history(events: Sequence[HistoryEvent]) -> Story:
    reader = _Reader()
    for event in events:
        reader.read(event)
    tell_what_followed(reader.story.entries, reader.voided)
    reader.story.blocked = reader.code.blocked.lines()
    return reader.story


@dataclass
class _Call:
    call_id: str
    tool: str
    step: int | None


class _Reader:
    """Walks a history once; remembers what each completion refers to."""

    def __init__(self) -> None:
        self.story = Story()
        self.scheduled: dict[int, HistoryEvent] = {}
        self.calls: list[_Call] = []  # tool calls of the last model answer not yet run
        self.gate = GateView()
        self.voids = VoidedApprovals()
        self.voided: list[Entry] = []  # approvals voided by a changed workspace
        self.code = CodeSteps()  # a coding task's workspace: tests, edits, its pull request

    def read(self, event: HistoryEvent) -> None:
        at, kind, story = event_time(event), event.event_type, self.story
        if kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            story.task = _decode(event.workflow_execution_started_event_attributes.input, TaskInput)
            if story.task is not None:
                self.gate.agent = story.task.agent
                who = story.task.context.user
                story.entries.append(Entry(at, EntryKind.START, story.task.request[:160], who=who))
        elif kind == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            self.scheduled[event.event_id] = event
            self._track_approvals(event)
        elif kind == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            started = self.scheduled.get(attrs.scheduled_event_id)
            if started is not None:
                self._track_approvers(started, attrs.result)
                story.entries.extend(self._completed(started, attrs.result, at))
        elif kind in (E.EVENT_TYPE_ACTIVITY_TASK_FAILED, E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT):
            story.entries.append(activity_failed(event, self.scheduled, at))
        elif kind == E.EVENT_TYPE_MARKER_RECORDED:
            entry = self._local(event, at)
            if entry is not None:
                story.entries.append(entry)
        elif kind in CHILD_EVENTS:
            said = read_child_event(event, story.task, story.children)
            if said is not None:
                story.entries.append(Entry(at, EntryKind.CHILD, said))
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            waits = child_wait(event, story.children)
            signal_kind, said, sender = (
                (EntryKind.CHILD, waits, None) if waits else signal_entry(event, self.gate)
            )
            story.entries.append(Entry(at, signal_kind, said, who=sender))
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            decided = update_entry(event, self.gate)
            if decided is not None:
                story.entries.append(Entry(at, decided[0], decided[1], who=decided[2]))
        elif kind == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            found_status = decode_search_attributes(
                event.upsert_workflow_search_attributes_event_attributes.search_attributes
            ).get(search.STATUS.name)
            if found_status:
                story.entries.append(Entry(at, EntryKind.STATUS, f"now {found_status[0]}"))
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            story.result = _decode(event.workflow_execution_completed_event_attributes.result, TaskResult)
            if story.result is not None:
                what = f"{story.result.status.value}: {story.result.reason}"
                story.entries.append(Entry(at, EntryKind.STOP, what, step=story.result.steps))
        elif kind in _CLOSED:
            story.closed = _CLOSED[kind]
            message = _failure_message(event)
            story.entries.append(
                Entry(at, EntryKind.STOP, story.closed + (f": {message}" if message else ""))
            )

    def _track_approvals(self, scheduled: HistoryEvent) -> None:
        """The request a decision signal is checked against: posted, then resolved."""
        attrs = scheduled.activity_task_scheduled_event_attributes
        if attrs.activity_type.name == ActivityName.POST_APPROVAL_REQUEST:
            posted = _decode(attrs.input, PostApprovalRequestInput)
            if posted is not None:
                self.gate.posted(posted.request)
        elif attrs.activity_type.name == ActivityName.RESOLVE_APPROVAL_REQUEST:
            self.gate.resolved()
            decided = _decode(attrs.input, ResolveApprovalRequestInput)
            if decided is not None:
                self.voids.decided(decided)

    def _track_approvers(self, scheduled: HistoryEvent, result: Payloads) -> None:
        """Who the approvers stood for when last resolved: a budget extension is checked
        against them, as the task does (`workflows.budget_extenders`)."""
        if (
            scheduled.activity_task_scheduled_event_attributes.activity_type.name
            == ActivityName.PREPARE_APPROVAL
        ):
            prepared = _decode(result, PrepareApprovalResult)
            if prepared is not None:
                self.gate.approver_ids = list(prepared.approver_ids)

    def _completed(self, scheduled: HistoryEvent, result: Payloads, at: datetime) -> list[Entry]:
        """The entries of a finished activity; remembers the tool calls a model answer asked for."""
        attrs = scheduled.activity_task_scheduled_event_attributes
        name = attrs.activity_type.name
        if name == ActivityName.MCP_LIST_TOOLS:
            return [Entry(at, EntryKind.TOOL, said) for said in mcp_problems(_decode(result, McpListResult))]
        if name in CODE_ACTIVITIES:
            return self._code(attrs, result, at)
        if name != ActivityName.CALL_MODEL:
            entry = completed(scheduled, result, at)
            ran = tool_input(attrs) if entry is not None else None
            self.calls = [c for c in self.calls if ran is None or c.call_id != ran.call_id]
            return [entry] if entry is not None else []
        inp, out = _decode(attrs.input, ModelCallInput), _decode(result, ModelCallResult)
        if out is None:
            return []
        # Tool calls folded into this call ran in it, before the model was asked.
        folded = inp.folded_calls if inp is not None else []
        entries = [
            tool_entry(at, call.tool, outcome, call.step)
            for call, outcome in zip(folded, out.tool_results, strict=False)
        ]
        step = inp.step if inp else None
        entries.append(model_entry(at, out, step))
        self.calls = [_Call(c.id, c.name.replace("__", "."), step) for c in out.tool_calls]
        return entries

    def _code(
        self, attrs: ActivityTaskScheduledEventAttributes, result: Payloads, at: datetime
    ) -> list[Entry]:
        """A workspace activity's result, and an approval it voided (`surfaces.timeline_code`)."""
        name = attrs.activity_type.name
        inp = _decode(attrs.input, CodeToolInput) if name == CodeActivity.RUN_TOOL else None
        if inp is not None:  # a call of the model's answer, now run (or the task's own)
            self.calls = [c for c in self.calls if c.call_id != inp.call.call_id]
        answered = {
            CodeActivity.OPEN_PULL_REQUEST: "github.create_pull_request",
            LoopActivity.ACQUIRE_WORKSPACE: "code.open_workspace",
        }.get(name)
        call = next((c for c in self.calls if c.tool == answered), None)
        if call is not None:
            self.calls.remove(call)
        entry = self.code.entry(attrs, result, at, call.step if call else None)
        entries = [entry] if entry is not None else []
        if name == CodeActivity.RUN_TOOL:
            void = self.voids.diffed(inp, _decode(result, CodeToolResult))
            if void:
                self.voided.append(Entry(at, EntryKind.APPROVAL, void))
                entries.append(self.voided[-1])
        return entries

    def _local(self, event: HistoryEvent, at: datetime) -> Entry | None:
        """A local activity's marker: its result is recorded, its input is not."""
        name = local_activity_type(event)
        result = event.marker_recorded_event_attributes.details.get("result") or Payloads()
        if name == ActivityName.RECALL:
            found = _decode(result, RecallResult)
            return Entry(at, EntryKind.RECALL, f"recalled {len(found.items) if found else 0} memories")
        if name != ActivityName.RUN_TOOL:
            return None
        out = _decode(result, ToolCallResult)
        summary = event.user_metadata.summary.data.decode(errors="replace")
        # The tool is the next call of the model's answer; the summary names it when set.
        candidates = [c for c in self.calls if f"run {c.tool}" in summary] or self.calls
        call = candidates[0] if candidates else None
        if call is not None:
            self.calls.remove(call)
        return tool_entry(at, call.tool if call else "tool", out, call.step if call else None)


def _failure_message(event: HistoryEvent) -> str:
    if event.HasField("workflow_execution_failed_event_attributes"):
        return event.workflow_execution_failed_event_attributes.failure.message
    if event.HasField("workflow_execution_terminated_event_attributes"):
        return event.workflow_execution_terminated_event_attributes.reason
    return ""
