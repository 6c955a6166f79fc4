"""A task's run as export records (`surfaces.task_export_format`), read from its history and
its stored transcript. Pure: the caller fetches both.

`surfaces.timeline` tells the same history in sentences; this reads it with the same
decoders, approval gate and child tracking (`surfaces.timeline_*`), keeping every payload
whole: a model call's messages are rebuilt from the transcript rows the model activity read
(`activities.llm.compaction.build_prompt` over the rows before its answer, with the call's
view), so they are the messages as sent. Every string goes through the ledger's masking
before it becomes a record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from activities.llm.compaction import build_prompt
from activities.store.ledger import mask_secrets, mask_text
from surfaces.task_export_calls import Calls, at_of, masked_message, model_call, tool_call
from surfaces.task_export_format import (
    ApprovalDecidedRecord,
    ApprovalRequestedRecord,
    ChildRecord,
    EndRecord,
    ModelCallRecord,
    Record,
    SignalRecord,
    TaskRecord,
    ToolCallRecord,
)
from surfaces.task_export_steps import RefusedRow, refused_calls, with_steps
from surfaces.timeline_children import CHILD_EVENTS, ChildRun, read_child_event
from surfaces.timeline_entries import EntryKind, decode
from surfaces.timeline_signals import GateView, signal_entry, update_entry
from workers.history import event_time
from workflows.delegate_tool import CHILD_WAITING_SIGNAL
from workflows.message_types import PrepareApprovalResult
from workflows.types import (
    ActivityName,
    PostApprovalRequestInput,
    ResolveApprovalRequestInput,
    TaskInput,
    TaskResult,
)

E = EventType
_CLOSED = {  # how a run ended without a result: the `end` record's status
    E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "FAILED",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "TERMINATED",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "CANCELLED",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "TIMED_OUT",
}


def records_from_history(
    task_id: str,
    events: Sequence[HistoryEvent],
    transcript: list[dict[str, Any]] | None,
    refused: Sequence[RefusedRow] = (),
) -> tuple[TaskInput | None, list[Record]]:
    """The task's input and its records in time order (not yet numbered).

    `events` may be every run of a task that continued as new, oldest first: they are told
    as one run (the first run's `task` record, the last run's `end`).

    `transcript` is the task's stored rows (`activities.store.transcript.load`); None when
    they cannot be read, and then each model call's `messages` is null. `refused` is the
    task's refused tool calls from the audit ledger (they leave no event in the history)."""
    reader = _Reader(task_id, transcript)
    for event in events:
        reader.read(event)
    return reader.task, reader.finish(refused)


class _Reader:
    def __init__(self, task_id: str, transcript: list[dict[str, Any]] | None) -> None:
        self.task_id, self.transcript = task_id, transcript
        self.task: TaskInput | None = None
        self.records: list[Record] = []
        self.calls = Calls()
        self.gate = GateView()
        self.children: list[ChildRun] = []
        self.child_at: dict[str, str] = {}

    def read(self, event: HistoryEvent) -> None:
        kind, at = event.event_type, at_of(event_time(event))
        if kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            self._started(event, at)
        elif kind == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            self.calls.scheduled[event.event_id] = event
            self._approval_asked_or_decided(event, at)
        elif kind == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            self.calls.started[event.event_id] = event
        elif kind == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            self._completed(event, at)
        elif kind == E.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            self.records += self.calls.failed(self.task_id, event, at)
        elif kind == E.EVENT_TYPE_MARKER_RECORDED:
            self.records += self.calls.local(self.task_id, event, at)
        elif kind in CHILD_EVENTS:
            # A start appends the child: the newest child starts now (an end leaves it be).
            if read_child_event(event, self.task, self.children) is not None and self.children:
                self.child_at.setdefault(self.children[-1].task_id, at)
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            attrs = event.workflow_execution_signaled_event_attributes
            if attrs.signal_name != CHILD_WAITING_SIGNAL:  # a child's wait: told by its own export
                self._signal(attrs.signal_name, "signal", signal_entry(event, self.gate), at)
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            told = update_entry(event, self.gate)
            if told is not None:
                name = told[1].split(" ", 1)[0]  # "approve from U1", "extend budget from U1"
                self._signal("extend_budget" if name == "extend" else name, "update", told, at)
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            result = decode(event.workflow_execution_completed_event_attributes.result, TaskResult)
            if result is not None:
                self.records.append(self._end(at, result.status.value, result))
        elif kind in _CLOSED:
            self.records.append(self._end(at, _CLOSED[kind], None, _closed_message(event)))

    def _started(self, event: HistoryEvent, at: str) -> None:
        if self.task is not None:  # a later run of a task that continued as new: one story
            return
        self.task = decode(event.workflow_execution_started_event_attributes.input, TaskInput)
        if self.task is None:
            return
        self.gate.agent = self.task.agent
        context = self.task.context
        self.records.append(
            TaskRecord(
                task_id=self.task_id,
                at=at,
                request=mask_text(self.task.request),
                requested_by=context.user,
                surface=context.surface,
                channel=context.channel,
                thread=context.thread,
                task_kind=self.task.task_kind,
                parent=self.task.parent,
                tools=sorted(spec.name for spec in self.task.tools),
            )
        )

    def _approval_asked_or_decided(self, event: HistoryEvent, at: str) -> None:
        attrs = event.activity_task_scheduled_event_attributes
        name = attrs.activity_type.name
        if name == ActivityName.POST_APPROVAL_REQUEST:
            posted = decode(attrs.input, PostApprovalRequestInput)
            if posted is None:
                return
            self.gate.posted(posted.request)
            asked = posted.request
            self.records.append(
                ApprovalRequestedRecord(
                    task_id=self.task_id,
                    at=at,
                    request_id=asked.request_id,
                    action_id=asked.action_id,
                    tool=asked.tool,
                    arguments=mask_secrets(asked.arguments),
                    approvers=list(asked.approvers),
                    expires_at=asked.expires_at_iso,
                    estimated_cost_usd=asked.estimated_cost_usd,
                )
            )
        elif name == ActivityName.RESOLVE_APPROVAL_REQUEST:
            self.gate.resolved()
            decided = decode(attrs.input, ResolveApprovalRequestInput)
            if decided is None:
                return
            if decided.outcome == "approved":  # the call runs next; a local run does not say by whom
                self.calls.approved[decided.request.tool] = decided.decided_by
            self.records.append(
                ApprovalDecidedRecord(
                    task_id=self.task_id,
                    at=at,
                    request_id=decided.request.request_id,
                    action_id=decided.request.action_id,
                    tool=decided.request.tool,
                    outcome=decided.outcome,
                    decided_by=decided.decided_by,
                    decided_at=decided.decided_at_iso,
                )
            )

    def _completed(self, event: HistoryEvent, at: str) -> None:
        attrs = event.activity_task_completed_event_attributes
        scheduled = self.calls.scheduled.get(attrs.scheduled_event_id)
        if scheduled is None:
            return
        name = scheduled.activity_task_scheduled_event_attributes.activity_type.name
        took = self.calls.took_ms(attrs.started_event_id, event)
        if name == ActivityName.PREPARE_APPROVAL:  # whom a budget extension is checked against
            prepared = decode(attrs.result, PrepareApprovalResult)
            if prepared is not None:
                self.gate.approver_ids = list(prepared.approver_ids)
        elif name == ActivityName.CALL_MODEL:
            attempt = self.calls.attempt(attrs.started_event_id)
            self.records += model_call(
                self.task_id, scheduled, attrs.result, at, took, attempt, self._prompt, self.calls
            )
        else:
            self.records += tool_call(self.task_id, scheduled, attrs.result, at, took, self.calls)

    def _prompt(self, upto: int, view: Any) -> list[dict[str, Any]] | None:
        """The messages a model call sent: the prompt built from the rows before its answer."""
        if self.transcript is None:
            return None
        rows = [row for row in self.transcript if row["seq"] <= upto]
        return [masked_message(message) for message in build_prompt(rows, view)]

    def _signal(self, name: str, via: str, told: tuple[EntryKind, str, str | None], at: str) -> None:
        kind, text, by = told
        self.records.append(
            SignalRecord(
                task_id=self.task_id,
                at=at,
                name=name,
                via="update" if via == "update" else "signal",
                by=by,
                counted=kind is not EntryKind.REFUSED,
                text=mask_text(text),
            )
        )

    def _end(self, at: str, status: str, result: TaskResult | None, message: str = "") -> EndRecord:
        calls = [r for r in self.records if isinstance(r, ModelCallRecord)]
        usage = result.usage if result is not None else None
        return EndRecord(
            task_id=self.task_id,
            at=at,
            status=status,
            reason=mask_text(result.reason if result else message),
            next_action=result.next_action if result else "",
            reply=mask_text(result.reply if result else ""),
            steps=result.steps if result else max((c.step for c in calls), default=0),
            tokens_in=usage.prompt_tokens if usage else sum(c.tokens_in for c in calls),
            tokens_out=usage.completion_tokens if usage else sum(c.tokens_out for c in calls),
            cost_usd=usage.cost_usd if usage else sum(c.cost_usd for c in calls),
            model_calls=len(calls),
            tool_calls=0,  # counted when every call is in (`finish`)
        )

    def finish(self, refused: Sequence[RefusedRow]) -> list[Record]:
        """The records, each child's told where it started with how it ended."""
        records = self.records + refused_calls(self.task_id, refused, self.calls.every)
        for child in self.children:
            result = child.result
            records.append(
                ChildRecord(
                    task_id=self.task_id,
                    at=self.child_at.get(child.task_id, records[0].at if records else ""),
                    child_task_id=child.task_id,
                    role=child.kind.value,
                    agent=child.agent,
                    request=mask_text(child.request),
                    status=result.status.value
                    if result
                    else (child.closed.upper() if child.closed else None),
                    reason=mask_text(result.reason) if result else None,
                    steps=result.steps if result else None,
                    cost_usd=result.usage.cost_usd if result else None,
                )
            )
        records.sort(key=lambda record: record.at)  # stable: history order within a moment
        # The end's counts cover the refused calls, told from the ledger after it.
        tools = sum(1 for record in records if isinstance(record, ToolCallRecord))
        records = [
            r.model_copy(update={"tool_calls": tools}) if isinstance(r, EndRecord) else r for r in records
        ]
        return with_steps(records)


def _closed_message(event: HistoryEvent) -> str:
    if event.HasField("workflow_execution_failed_event_attributes"):
        return event.workflow_execution_failed_event_attributes.failure.message
    if event.HasField("workflow_execution_terminated_event_attributes"):
        return event.workflow_execution_terminated_event_attributes.reason
    return ""
