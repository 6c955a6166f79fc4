"""The children in a task's history (subagents and teammates), and a story with theirs in it.

A parent's history records each child it started (with the child's input) and how each
ended (with its result); the child's own steps are in the child's history. `with_children`
folds the children's stories into the parent's, each entry marked with the child it comes
from, so the parent's timeline, `explain` and total cost cover the whole tree. Pure
functions over recorded data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from surfaces.timeline_entries import EntryKind
from surfaces.timeline_signals import decode
from workflows.delegate_tool import CHILD_WAITING_SIGNAL, ChildWait
from workflows.types import TaskInput, TaskResult

if TYPE_CHECKING:
    from surfaces.timeline_entries import Story

E = EventType
CHILD_EVENTS = {
    E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
}
_CHILD_CLOSED = {  # how a child ended without a result, and where the event says which child
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED: ("failed", "child_workflow_execution_failed"),
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED: ("cancelled", "child_workflow_execution_canceled"),
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT: ("timed out", "child_workflow_execution_timed_out"),
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED: ("terminated", "child_workflow_execution_terminated"),
}


_SAID_BY_THE_PARENT = (EntryKind.START, EntryKind.STATUS)


class TaskRole(StrEnum):
    """Where a task sits in a tree: the task asked for, a playbook step's, or a child one started."""

    TASK = "task"
    STEP = "step"
    SUBAGENT = "subagent"
    TEAMMATE = "teammate"


@dataclass
class ChildRun:
    """A child task as its parent's history tells it."""

    task_id: str
    kind: TaskRole  # SUBAGENT or TEAMMATE
    agent: str
    request: str
    result: TaskResult | None = None
    closed: str | None = None  # how it ended when it did not return a result

    @property
    def label(self) -> str:
        return f"teammate {self.agent}" if self.kind is TaskRole.TEAMMATE else "subagent"


def child_kind(parent_id: str, child_id: str) -> TaskRole:
    """Subagents' ids are the parent's then `-d<step>-…`, teammates' `-t<step>-…`."""
    return TaskRole.TEAMMATE if child_id.removeprefix(parent_id).startswith("-t") else TaskRole.SUBAGENT


def read_child_event(event: HistoryEvent, parent: TaskInput | None, children: list[ChildRun]) -> str | None:
    """What the timeline says of a child's start or end, remembering the child in
    `children`; None for an event this version cannot read."""
    if event.event_type == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        attrs = event.start_child_workflow_execution_initiated_event_attributes
        started = decode(attrs.input, TaskInput)
        parent_id = parent.task_id if parent is not None else ""
        child = ChildRun(
            attrs.workflow_id,
            child_kind(parent_id, attrs.workflow_id),
            started.agent.name if started is not None else "?",
            started.request if started is not None else "",
        )
        children.append(child)
        return f"started {child.label} {child.task_id}: {child.request[:100]}"
    if event.event_type == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
        done = event.child_workflow_execution_completed_event_attributes
        found = _find(children, done.workflow_execution.workflow_id)
        result = decode(done.result, TaskResult)
        if found is None or result is None:
            return None
        found.result = result
        what = f"{found.label} {found.task_id} ended {result.status.value} after {result.steps} step(s)"
        return what
    how, field_name = _CHILD_CLOSED.get(event.event_type, ("", ""))
    if not field_name:
        return None
    attrs = getattr(event, f"{field_name}_event_attributes")
    found = _find(children, attrs.workflow_execution.workflow_id)
    if found is None:
        return None
    found.closed = how
    return f"{found.label} {found.task_id} {how}"


def child_wait(event: HistoryEvent, children: list[ChildRun]) -> str | None:
    """What a child's `child_waiting` signal says; None for any other signal."""
    attrs = event.workflow_execution_signaled_event_attributes
    if attrs.signal_name != CHILD_WAITING_SIGNAL:
        return None
    wait = decode(attrs.input, ChildWait)
    if wait is None:
        return None
    found = _find(children, wait.child_id)
    who = f"{found.label if found else 'child'} {wait.child_id}"
    if not wait.tool:
        return f"{who} no longer waits for an approval"
    return f"{who} waits for approval of {wait.tool} by {', '.join(wait.approvers) or 'an approver'}"


def _find(children: list[ChildRun], task_id: str) -> ChildRun | None:
    return next((child for child in children if child.task_id == task_id), None)


def with_children(story: Story, stories: dict[str, Story]) -> Story:
    """The story with each child's entries in it (recursively), in time order, each marked
    with the child it comes from; its cost is then the whole tree's. A child's start and
    status changes are left out: the parent's own entries say when it started and ended."""
    entries = list(story.entries)
    parent_id = story.task.task_id if story.task is not None else ""
    for child in story.children:
        child_story = stories.get(child.task_id)
        if child_story is None:
            continue
        mark = f"[{child.label} {child.task_id.removeprefix(parent_id).lstrip('-')}] "
        nested = with_children(child_story, stories)
        entries += [
            replace(entry, what=mark + entry.what)
            for entry in nested.entries
            if entry.kind not in _SAID_BY_THE_PARENT
        ]
    floor = datetime.min.replace(tzinfo=UTC)
    entries.sort(key=lambda entry: entry.at or floor)
    return replace(story, entries=entries)
