"""Recorded workflow histories: fetch them, store them as JSON, replay them against the code.

`openloop replay`, the replay tests over `tests/workflow/histories/` and the recorder share
these helpers, so a history exported with `temporal workflow show --output json`, one
fetched from the server and one committed to the repository replay the same way: with the
same sandbox and data converter as the worker.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Interceptor, Replayer

from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.payloads import data_converter
from workflows.playbook_run import PlaybookRunWorkflow
from workflows.repair_loop import RepairLoopWorkflow
from workflows.types import WORKFLOW_NAME

# The core wraps its message in a Rust debug dump; this picks the message out.
_CORE_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
_EVENT_ID = re.compile(r"HistoryEvent\(id: (\d+)")
# "Activity type of scheduled event 'openloop.tool.run' does not match ..."
_NAMED_ACTIVITY = re.compile(r"scheduled event '([^']+)'")
_LOCAL_SEQ = re.compile(r"LocalActivity\((\d+)\)")
_TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
# Events a workflow's commands produce: where a changed workflow shows up first.
_COMMAND_EVENTS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED,
    EventType.EVENT_TYPE_MARKER_RECORDED,
    EventType.EVENT_TYPE_TIMER_STARTED,
    EventType.EVENT_TYPE_TIMER_CANCELED,
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
}

# The workflows whose histories replay: agent tasks, repair loops and playbook runs.
REPLAYED: tuple[type, ...] = (AgentTaskWorkflow, RepairLoopWorkflow, PlaybookRunWorkflow)


async def fetch_history(client: Client, task_id: str, run_id: str | None = None) -> WorkflowHistory:
    """The history of a task's run (the latest run when `run_id` is None)."""
    return await client.get_workflow_handle(task_id, run_id=run_id).fetch_history()


def history_workflow_id(events: Sequence[HistoryEvent], fallback: str) -> str:
    """The workflow id recorded in the start event; older servers leave it out."""
    if events and events[0].HasField("workflow_execution_started_event_attributes"):
        recorded = events[0].workflow_execution_started_event_attributes.workflow_id
        if recorded:
            return recorded
    return fallback


def load_history(path: Path) -> WorkflowHistory:
    """A history from a JSON file (`temporal workflow show --output json`, or `write_history`)."""
    try:
        raw: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable JSON history ({exc})") from exc
    if not isinstance(raw, dict) or not raw.get("events"):
        raise ValueError(
            f"{path}: no `events` in this file; export one with "
            "`temporal workflow show --workflow-id ID --output json > FILE`"
        )
    history = WorkflowHistory.from_json(path.stem, raw)
    return WorkflowHistory(history_workflow_id(history.events, path.stem), history.events)


def write_history(history: WorkflowHistory, path: Path) -> Path:
    """Store a history as pretty JSON in the same format `temporal workflow show` writes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
    return path


@dataclass(frozen=True)
class ReplayReport:
    """How one recorded run replayed against the current code."""

    workflow_id: str
    run_id: str
    error: str | None = None  # None: the code reproduces the recorded history exactly
    error_type: str | None = None  # NondeterminismError for a code change that breaks replay
    diverged_at: str | None = None  # the recorded event the code no longer matches

    @property
    def ok(self) -> bool:
        return self.error is None


@cache
def _quiet_runtime() -> Runtime:
    """A runtime without the core's log lines: each failure is reported once, by us."""
    return Runtime(telemetry=TelemetryConfig(logging=None, metrics=None))


def replayer(
    workflows: Sequence[type] = REPLAYED,
    interceptors: Sequence[Interceptor] = (),
) -> Replayer:
    """A replayer set up like the worker: same sandbox, same data converter."""
    return Replayer(
        workflows=list(workflows),
        workflow_runner=workflow_runner(),
        data_converter=data_converter,
        interceptors=list(interceptors),
        runtime=_quiet_runtime(),
    )


async def replay(
    histories: Iterable[WorkflowHistory] | AsyncIterator[WorkflowHistory],
    workflows: Sequence[type] = REPLAYED,
) -> list[ReplayReport]:
    """Replay every history; one report each, failures included (never raises for them)."""
    reports: list[ReplayReport] = []
    failed: list[tuple[int, WorkflowHistory, BaseException]] = []
    async with replayer(workflows).workflow_replay_iterator(_aiter(histories)) as results:
        async for result in results:
            if result.replay_failure is not None:
                failed.append((len(reports), result.history, result.replay_failure))
            reports.append(ReplayReport(result.history.workflow_id, result.history.run_id))
    for index, history, failure in failed:
        message = failure_message(failure)
        event = await locate_divergence(history, message, workflows)
        reports[index] = ReplayReport(
            history.workflow_id,
            history.run_id,
            error=message,
            error_type=type(failure).__name__,
            diverged_at=describe_event(event) if event is not None else None,
        )
    return reports


async def _aiter(
    histories: Iterable[WorkflowHistory] | AsyncIterator[WorkflowHistory],
) -> AsyncIterator[WorkflowHistory]:
    if isinstance(histories, AsyncIterator):
        async for history in histories:
            yield history
    else:
        for history in histories:
            yield history


def failure_message(failure: BaseException) -> str:
    """The core's own words (`[TMPRL1100] Nondeterminism error: ...`) without the Rust wrapping."""
    text = str(failure) or type(failure).__name__
    inner = _CORE_MESSAGE.search(text)
    return inner.group(1).replace('\\"', '"').replace("\\'", "'") if inner else text


async def _replays(history: WorkflowHistory, workflows: Sequence[type]) -> bool:
    async with replayer(workflows).workflow_replay_iterator(_aiter([history])) as results:
        async for result in results:
            return result.replay_failure is None
    return True


async def locate_divergence(
    history: WorkflowHistory, message: str, workflows: Sequence[type] = REPLAYED
) -> HistoryEvent | None:
    """The recorded event where the code stops matching the history.

    The core's message rarely names an event, so replay ever longer prefixes of the history
    (each ending where a workflow task starts, as the server would hand it to a worker) and
    find the first workflow task whose commands no longer match; the event is the command
    in that task's span that the message names, else its first command.
    """
    events = list(history.events)
    named_id = _EVENT_ID.search(message)  # "No command scheduled for event HistoryEvent(id: 5, ..."
    if named_id:
        found = next((e for e in events if e.event_id == int(named_id.group(1))), None)
        if found is not None:
            return found
    starts = [i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED]
    low, high = 1, len(starts)  # find the first prefix (ending at starts[k]) that fails
    while low < high:
        middle = (low + high) // 2
        prefix = WorkflowHistory(history.workflow_id, events[: starts[middle] + 1])
        if await _replays(prefix, workflows):
            low = middle + 1
        else:
            high = middle
    begin = starts[low - 1] + 1 if starts else 0
    end = starts[low] if low < len(starts) else len(events)
    span = [e for e in events[begin:end] if e.event_type in _COMMAND_EVENTS]
    local = _LOCAL_SEQ.search(message)  # "Missing associated machine for LocalActivity(2)"
    if local:
        for event in span:
            if _marker_data(event).get("seq") == int(local.group(1)):
                return event
    named = _NAMED_ACTIVITY.search(message)
    if named:
        for event in span:
            if event.activity_task_scheduled_event_attributes.activity_type.name == named.group(1):
                return event
    if span:
        return span[0]
    # The code issued a command where the recorded task issued none: point at that task.
    return next((e for e in events[begin:end] if e.event_type == _TASK_COMPLETED), None)


def describe_event(event: HistoryEvent) -> str:
    kind = _event_type_name(event)
    detail = ""
    if event.HasField("activity_task_scheduled_event_attributes"):
        detail = f" ({event.activity_task_scheduled_event_attributes.activity_type.name})"
    elif event.HasField("marker_recorded_event_attributes"):
        detail = f" ({local_activity_type(event) or event.marker_recorded_event_attributes.marker_name})"
    elif event.HasField("workflow_execution_signaled_event_attributes"):
        detail = f" ({event.workflow_execution_signaled_event_attributes.signal_name})"
    elif event.HasField("timer_started_event_attributes"):
        seconds = event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        detail = f" ({seconds})"
    when = event_time(event).isoformat()
    return f"event {event.event_id} {kind}{detail} at {when}"


def _marker_data(event: HistoryEvent) -> dict[str, Any]:
    """What the core records about a local activity in its marker (seq, activity type, ...)."""
    if not event.HasField("marker_recorded_event_attributes"):
        return {}
    payloads = event.marker_recorded_event_attributes.details.get("data")
    if payloads is None or not payloads.payloads:
        return {}
    try:
        data = json.loads(payloads.payloads[0].data)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def local_activity_type(event: HistoryEvent) -> str | None:
    """The activity type of a local activity's marker (it is not a field of the event)."""
    return str(_marker_data(event).get("activity_type") or "") or None


def event_time(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime().replace(tzinfo=UTC)


def _event_type_name(event: HistoryEvent) -> str:
    name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
    return "".join(part.capitalize() for part in name.split("_"))


def task_query(since: datetime | None = None, extra: str | None = None) -> str:
    """A visibility query for OpenLoop tasks, optionally started after `since`."""
    clauses = [f"WorkflowType = '{WORKFLOW_NAME}'"]
    if since is not None:
        clauses.append(f"StartTime > '{since.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}'")
    if extra:
        clauses.append(f"({extra})")
    return " AND ".join(clauses)


async def histories_matching(client: Client, query: str) -> AsyncIterator[WorkflowHistory]:
    """Every run the visibility query lists, fetched one at a time."""
    async for history in client.list_workflows(query).map_histories():
        yield history
