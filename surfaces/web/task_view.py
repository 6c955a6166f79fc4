"""What the dashboard shows about tasks, read from Temporal: the filtered, paged list (the same
search attributes as the Web UI and `openloop tasks list`) and one task's page (timeline,
explanation, cost by model, reply), asked of a running task itself when a worker can answer
and read from its history otherwise. A finished task's history is whole, so it is not asked:
answering would replay all of it on a worker for each of two queries (0.35 s each at 100
steps, `python -m bench dashboard`); the tool calls it refused, which leave no event, come
from its audit rows, as do the decisions its decision update refused (running or not).
Pure reads: nothing here signals a task.
"""

from __future__ import annotations

import asyncio
import base64
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus

from activities.store.ledger_reports import list_audit
from surfaces.decisions import status_of
from surfaces.task_lookup import (
    ask_task,
    decision_chain,
    describe_task,
    explain_story,
    qualified_reason,
    while_running,
    with_refusals,
    worker_is_polling,
)
from surfaces.timeline import Entry, EntryKind, story_from_history
from workers import history as histories
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.outcomes import next_action
from workflows.types import TaskStatus, TaskStatusView

PAGE_SIZE = 25
FILTERS = {
    "agent": search.AGENT,
    "channel": search.CHANNEL,
    "surface": search.SURFACE,
    "status": search.STATUS,
}
ROW_QUERY_TIMEOUT = timedelta(seconds=2)


class BadFilter(ValueError):
    """A filter value the visibility query cannot take."""


def list_query(filters: dict[str, str]) -> str:
    """The visibility query for the filters (also shown, to paste into the Web UI)."""
    clauses = []
    for name, key in FILTERS.items():
        value = filters.get(name, "").strip()
        if not value:
            continue
        if name == "status":
            if value.upper() not in TaskStatus.__members__:
                raise BadFilter(f"unknown status {value!r}; one of {', '.join(TaskStatus)}")
            value = value.upper()
        if "'" in value or "\\" in value:
            raise BadFilter(f"{value!r}: quotes and backslashes are not allowed in a filter")
        clauses.append(f"{key.name} = '{value}'")
    return histories.task_query(extra=" AND ".join(clauses) or None)


@dataclass
class Row:
    task_id: str
    agent: str
    channel: str
    surface: str
    status: str
    started: datetime | None
    cost_usd: float | None
    step: int | None = None
    summary: str = ""


async def list_page(client: Client, query: str, token: str | None) -> tuple[list[Row], str | None]:
    """One page of tasks, newest first, and the token of the next page (None at the end)."""
    raw = base64.urlsafe_b64decode(token.encode()) if token else None
    listing = client.list_workflows(query, page_size=PAGE_SIZE, next_page_token=raw)
    await listing.fetch_next_page()
    executions = list(listing.current_page or [])
    rows = [await _row(execution) for execution in executions]
    await _add_live_steps(client, executions, rows)
    following = listing.next_page_token
    return rows, base64.urlsafe_b64encode(following).decode() if following else None


async def _row(execution: WorkflowExecution) -> Row:
    attrs = execution.typed_search_attributes
    try:
        summary = str(await execution.memo_value("description", ""))
    except Exception:  # a memo this version cannot read is left out
        summary = ""
    return Row(
        task_id=execution.id,
        agent=attrs.get(search.AGENT) or "",
        channel=attrs.get(search.CHANNEL) or "",
        surface=attrs.get(search.SURFACE) or "",
        status=status_of(execution),
        started=execution.start_time,
        cost_usd=attrs.get(search.COST_USD),
        summary=summary,
    )


async def _add_live_steps(client: Client, executions: list[WorkflowExecution], rows: list[Row]) -> None:
    """Step and cost so far of the running tasks, asked of them at once (if a worker answers)."""
    polled: dict[str, bool] = {}
    for queue in {e.task_queue for e in executions if e.status == WorkflowExecutionStatus.RUNNING}:
        polled[queue] = await worker_is_polling(client, queue)

    async def ask(row: Row) -> None:
        handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, row.task_id)
        try:
            view = await handle.query(AgentTaskWorkflow.status, rpc_timeout=ROW_QUERY_TIMEOUT)
        except Exception:  # no answer in time: the row shows what visibility knows
            return
        row.step, row.cost_usd = view.step, view.usage.cost_usd

    await asyncio.gather(
        *(
            ask(row)
            for execution, row in zip(executions, rows, strict=True)
            if execution.status == WorkflowExecutionStatus.RUNNING and polled.get(execution.task_queue)
        )
    )


@dataclass
class TaskPage:
    task_id: str
    agent: str
    channel: str
    surface: str
    namespace: str
    running: bool
    status: str
    reason: str
    next_action: str
    request: str = ""
    requester: str = ""
    reply: str = ""
    step: int | None = None
    live: bool = False  # answered by the task itself, not read from the history
    entries: list[Entry] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    cost_by_model: list[tuple[str, int, float]] = field(default_factory=list)
    cost_usd: float = 0.0
    view: TaskStatusView | None = None
    history_length: int = 0
    blocked: list[str] = field(default_factory=list)  # what the network allowlist refused its commands


async def task_page(client: Client, task_id: str, pool: AsyncConnectionPool | None = None) -> TaskPage:
    """Everything the task page shows; raises `TaskNotFound` for an unknown id. `pool`: where
    a finished task's refused tool calls are read from (left out without one)."""
    description = await describe_task(client, task_id)
    running = description.status == WorkflowExecutionStatus.RUNNING
    asked = await ask_task(client, task_id, description.task_queue) if running else None
    history = await histories.fetch_history(client, task_id)
    story = story_from_history(history.events)
    if not running and pool is not None:
        story.entries = await with_audited_refusals(pool, task_id, story.entries)
    attrs = description.typed_search_attributes
    surface = attrs.get(search.SURFACE) or ""
    page = TaskPage(
        task_id=task_id,
        agent=attrs.get(search.AGENT) or "",
        channel=attrs.get(search.CHANNEL) or "",
        surface=surface,
        namespace=client.namespace,
        running=running,
        status="",
        reason="",
        next_action="",
        history_length=len(history.events),
        blocked=story.blocked,
    )
    if story.task is not None:
        page.request, page.requester = story.task.request, story.task.context.user
    approvals = [entry.what for entry in story.entries if entry.kind is EntryKind.APPROVAL]
    if asked is not None:
        explanation, view = asked
        page.live, page.view, page.step = True, view, view.step
        page.status, page.reason = explanation.status.value, explanation.reason
        page.next_action = explanation.next_action
        page.reason = page.reason.removeprefix(f"stopped: {page.status}: ")
        if not explanation.status.finished:
            page.reason, page.next_action = while_running(view, surface)
        page.entries = with_refusals(story.entries, explanation)
        page.decisions = decision_chain(story, explanation)
        page.reply = view.reply
    else:
        recorded = attrs.get(search.STATUS) or "RUNNING"
        page.status, page.reason, page.next_action = explain_story(story, task_id, recorded)
        page.entries, page.decisions = story.entries, decision_chain(story)
    if story.result is not None:
        page.reply, page.step = story.result.reply or page.reply, story.result.steps
    if page.status in TaskStatus.__members__:
        known = TaskStatus(page.status)
        page.reason = qualified_reason(known, page.reason, approvals)
        if known.finished:
            page.next_action = next_action(known, task_id, surface=surface) or page.next_action
    if pool is not None:
        page.entries = await with_refused_decisions(pool, task_id, page.entries)
    page.cost_by_model = cost_by_model(page.entries)
    page.cost_usd = sum(cost for _, _, cost in page.cost_by_model)
    return page


async def with_audited_refusals(pool: AsyncConnectionPool, task_id: str, entries: list[Entry]) -> list[Entry]:
    """`entries` and the tool calls the task refused, from its `tool_refused` audit rows (a
    running task tells them in its `explain` answer instead: `with_refusals`)."""
    rows = await list_audit(pool, task_id=task_id, kind="tool_refused", limit=1000)
    refused = [
        Entry(
            datetime.fromisoformat(row["created_at"]),
            EntryKind.REFUSED,
            f"{row['tool']}: {row['outcome']}",
            row["step"],
        )
        for row in reversed(rows)
    ]
    return _in_order(entries, refused)


async def with_refused_decisions(
    pool: AsyncConnectionPool, task_id: str, entries: list[Entry]
) -> list[Entry]:
    """`entries` and the decisions the task's decision update refused: they never reach its
    history, only the audit rows the surfaces wrote for them (`surfaces.decisions.decide`)."""
    refused: list[Entry] = []
    for kind in ("approval_refused", "budget_extension_refused"):
        for row in await list_audit(pool, task_id=task_id, kind=kind, limit=1000):
            asked = row["arguments_preview"] if isinstance(row["arguments_preview"], dict) else {}
            what = asked.get("decision") or "budget extension"
            said = f"{what} from {row['approver']} refused: {row['outcome']}"
            refused.append(
                Entry(datetime.fromisoformat(row["created_at"]), EntryKind.REFUSED, said, who=row["approver"])
            )
    return _in_order(entries, refused)


def _in_order(entries: list[Entry], more: list[Entry]) -> list[Entry]:
    floor = datetime.min.replace(tzinfo=UTC)
    return sorted(entries + more, key=lambda entry: entry.at or floor) if more else entries


def cost_by_model(entries: list[Entry]) -> list[tuple[str, int, float]]:
    """(model, calls, cost) from the model entries of a timeline, most expensive first."""
    calls: dict[str, int] = defaultdict(int)
    costs: dict[str, float] = defaultdict(float)
    for entry in entries:
        if entry.kind is EntryKind.MODEL:
            model = entry.what.split(": ", 1)[0]
            calls[model] += 1
            costs[model] += entry.cost_usd
    return sorted(((m, calls[m], costs[m]) for m in calls), key=lambda row: (-row[2], row[0]))


__all__ = ["BadFilter", "Row", "TaskPage", "list_page", "list_query", "task_page"]
