"""Finding out about one task: describe it, ask it (queries) when a worker can, and say
what it is doing, why it stopped and what would move it on.

A query on a task (running or closed) is answered by a worker replaying it, so with no
worker polling the task's queue it would only wait for its timeout; `ask_task` checks for
a recent poller first and returns None instead, and callers read the history
(`surfaces.timeline`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.service import RPCError, RPCStatusCode

from surfaces.timeline import Entry, EntryKind, Story, parse_iso
from workflows.agent_task import AgentTaskWorkflow
from workflows.outcomes import next_action
from workflows.types import Explanation, TaskStatus, TaskStatusView

QUERY_TIMEOUT = timedelta(seconds=3)  # answering means replaying the task on a worker
# A live worker long-polls continuously (each poll lasts about a minute at most), so a
# poller not seen for longer than this has stopped.
POLLER_FRESHNESS = timedelta(seconds=90)


class TaskNotFound(LookupError):
    """No workflow with this id in the namespace."""


async def describe_task(client: Client, task_id: str) -> WorkflowExecutionDescription:
    try:
        return await client.get_workflow_handle(task_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise TaskNotFound(f"no task {task_id} in namespace {client.namespace}") from None
        raise


async def worker_is_polling(client: Client, task_queue: str) -> bool:
    """Whether a worker polled the task's workflow queue recently."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    fresh_after = datetime.now(UTC) - POLLER_FRESHNESS
    return any(
        poller.last_access_time.ToDatetime().replace(tzinfo=UTC) > fresh_after for poller in response.pollers
    )


async def ask_task(
    client: Client, task_id: str, task_queue: str
) -> tuple[Explanation, TaskStatusView] | None:
    """The task's own explanation and status, or None when no worker can answer."""
    if not await worker_is_polling(client, task_queue):
        return None
    handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
    try:
        explanation = await handle.query(AgentTaskWorkflow.explain, rpc_timeout=QUERY_TIMEOUT)
        status = await handle.query(AgentTaskWorkflow.status, rpc_timeout=QUERY_TIMEOUT)
    except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError, TimeoutError):
        return None  # a replay that no longer matches the code, a worker gone mid-way
    return explanation, status


def with_refusals(entries: list[Entry], explanation: Explanation) -> list[Entry]:
    """Add the tool calls the task refused (policy, invalid arguments): they are in its own
    step records (the `explain` query) but leave no event of their own in the history."""
    refused = [
        Entry(parse_iso(step.at_iso), EntryKind.REFUSED, step.summary, step=step.step, who=step.actor)
        for step in explanation.steps
        if step.kind == "refused"
    ]
    if not refused:
        return entries
    floor = datetime.min.replace(tzinfo=UTC)
    return sorted(entries + refused, key=lambda entry: entry.at or floor)


def while_running(view: TaskStatusView, surface: str = "") -> tuple[str, str]:
    """What a task that has not finished is doing, and what would move it on."""
    task_id = view.task_id
    if view.status == TaskStatus.WAITING_APPROVAL and view.pending_approval is not None:
        approvers = ", ".join(view.pending_approval.approvers) or "an approver"
        return (
            f"waiting for {approvers} to approve {view.pending_approval.tool} "
            f"(expires {view.pending_approval.expires_at_iso})",
            f"An approver decides: `openloop approve {task_id} --as USER` (add --deny to refuse).",
        )
    if view.status == TaskStatus.WAITING_USER:
        where = "Answer with" if surface == "cli" else "Answer in the thread, or"
        return view.last_action, f'{where} `openloop reply {task_id} "..."`.'
    if view.status == TaskStatus.WAITING_BUDGET:
        return view.last_action, next_action(TaskStatus.BUDGET_EXHAUSTED, task_id)
    return view.last_action, f"Nothing: the task is working (`openloop tasks show {task_id}`)."


_TELLING = (
    EntryKind.START,
    EntryKind.MODEL,
    EntryKind.TOOL,
    EntryKind.APPROVAL,
    EntryKind.REFUSED,
    EntryKind.STATUS,
    EntryKind.SIGNAL,
    EntryKind.CHILD,
    EntryKind.REPLY,
    EntryKind.STOP,
    EntryKind.FAILURE,
)
_STATUS_WORDS = {
    "WAITING_APPROVAL": "waiting for an approval",
    "WAITING_BUDGET": "paused: a budget is reached, waiting for an extension",
    "WAITING_USER": "waiting for an answer",
    "RUNNING": "running",
    "QUEUED": "queued: the agent is at its task limit; it starts when a slot frees",
}


def decision_chain(story: Story, explanation: Explanation | None = None) -> list[str]:
    """Why the task went the way it did, step by step, in order: the start, each model call
    (with the model that answered), tool calls, approvals asked and decided (or expired),
    refused calls and decisions with why, budget pauses, replies and the stop.

    The history has every step but the tool calls the task refused before running them; a
    task that answers its `explain` query adds those from its own step records."""
    entries = with_refusals(story.entries, explanation) if explanation is not None else story.entries
    lines = []
    for entry in entries:
        if entry.kind not in _TELLING:
            continue
        what = entry.what
        if entry.kind is EntryKind.STATUS:
            state = what.removeprefix("now ")
            what = f"now {_STATUS_WORDS.get(state, state)}"
        step = (
            f" (step {entry.step})"
            if entry.step is not None and entry.kind in (EntryKind.MODEL, EntryKind.TOOL)
            else ""
        )
        lines.append(f"{entry.kind}: {what}{step}")
    return lines


def qualified_reason(status: TaskStatus, reason: str, approvals: Iterable[str]) -> str:
    """A success whose action was denied does not read as a plain success."""
    if status != TaskStatus.SUCCESS:
        return reason
    denied = [
        text.replace(" denied by ", " was denied by ", 1) for text in approvals if " denied by " in text
    ]
    return f"{reason}, but {'; '.join(denied)}" if denied else reason


def explain_story(story: Story, task_id: str, recorded_status: str) -> tuple[str, str, str]:
    """Status, reason and next action of a task that no worker can be asked about."""
    if story.result is not None:
        return story.result.status.value, story.result.reason, story.result.next_action
    if story.closed:
        reason = story.entries[-1].what if story.entries else story.closed
        action = "Nothing more will happen to it. Ask again if it is still needed."
        return story.closed.upper(), reason, action
    return recorded_status, "no worker is running to ask", "Start a worker (`openloop up`)."
