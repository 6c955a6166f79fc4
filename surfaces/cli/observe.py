"""`openloop tasks list|show`, `openloop explain` and `openloop replay`: looking at tasks.

`tasks list` filters with the same visibility queries as the Web UI and `temporal workflow
list --query`. `tasks show` and `explain` ask a running task itself (queries) and read a
finished one from its recorded history, so they work with no worker running. `replay` runs
recorded histories against the code in this checkout, before a deploy.
Exit codes: 0 ok, 1 a failed replay or an unknown task, 2 Temporal unreachable or bad input.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus, WorkflowHistory
from temporalio.service import RPCError

from config.settings import Settings
from surfaces.cli.terminal import commands, make_console
from surfaces.client import connect
from surfaces.task_lookup import (
    TaskNotFound,
    ask_task,
    decision_chain,
    describe_task,
    explain_story,
    qualified_reason,
    while_running,
    with_refusals,
)
from surfaces.timeline import Entry, Story, story_from_history
from workers import history as histories
from workflows import search
from workflows.outcomes import next_action
from workflows.types import TaskStatus

T = TypeVar("T")

EXIT_FAILED = 1
EXIT_UNAVAILABLE = 2
_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

tasks_app = typer.Typer(help="Agent tasks: list them, show one step by step.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
    app.command("explain")(explain)
    app.command("replay")(replay)


class _Fail(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _out() -> Console:
    return make_console()


def _run(work: Callable[[Settings, Client | None], Awaitable[T]], *, needs_client: bool = True) -> T:
    """Run one command against Temporal; errors become one line on stderr and an exit code."""

    async def main() -> T:
        settings = Settings.from_env()
        client = await connect(settings) if needs_client else None
        return await work(settings, client)

    try:
        return asyncio.run(main())
    except (_Fail, TaskNotFound, RuntimeError) as exc:  # connect() says how to reach Temporal
        make_console(stderr=True).print(f"[red]error:[/red] {escape(commands(str(exc)))}", soft_wrap=True)
        code = EXIT_FAILED if isinstance(exc, TaskNotFound) else EXIT_UNAVAILABLE
        raise typer.Exit(exc.code if isinstance(exc, _Fail) else code) from None


def _quoted(value: str) -> str:
    if "'" in value or "\\" in value:
        raise _Fail(f"{value!r}: quotes and backslashes are not allowed in a filter", EXIT_UNAVAILABLE)
    return f"'{value}'"


def list_query(
    agent: str | None = None,
    status: str | None = None,
    channel: str | None = None,
    surface: str | None = None,
    extra: str | None = None,
) -> str:
    """The visibility query `tasks list` runs; paste it into the Web UI or `temporal workflow list`."""
    clauses = []
    for key, value in ((search.AGENT, agent), (search.CHANNEL, channel), (search.SURFACE, surface)):
        if value:
            clauses.append(f"{key.name} = {_quoted(value)}")
    if status:
        try:
            clauses.append(f"{search.STATUS.name} = {_quoted(TaskStatus(status.upper()).value)}")
        except ValueError:
            known = ", ".join(s.value for s in TaskStatus)
            raise _Fail(f"unknown status {status!r}; one of {known}", EXIT_UNAVAILABLE) from None
    return histories.task_query(extra=" AND ".join(clauses + ([extra] if extra else [])) or None)


def _status_of(execution: WorkflowExecution) -> str:
    recorded = execution.typed_search_attributes.get(search.STATUS)
    temporal = execution.status
    if temporal not in (
        None,
        WorkflowExecutionStatus.RUNNING,
        WorkflowExecutionStatus.COMPLETED,
        WorkflowExecutionStatus.CONTINUED_AS_NEW,
    ):
        return temporal.name if temporal else "UNKNOWN"  # terminated, timed out: no result
    return recorded or (temporal.name if temporal else "UNKNOWN")


def _when(at: datetime | None) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S") if at else "–"


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:.4f}"


@tasks_app.command("list")
def list_tasks(
    agent: Annotated[str | None, typer.Option(help="Only this agent's tasks.")] = None,
    status: Annotated[str | None, typer.Option(help="RUNNING, WAITING_APPROVAL, SUCCESS, ...")] = None,
    channel: Annotated[str | None, typer.Option(help="Slack channel id, owner/repo, or CLI channel.")] = None,
    surface: Annotated[str | None, typer.Option(help="slack, github or cli.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 20,
    query: Annotated[str | None, typer.Option(help="An extra visibility query clause.")] = None,
) -> None:
    """List tasks, newest first, filtered by search attributes."""

    async def work(settings: Settings, client: Client | None) -> None:
        assert client is not None
        visibility = list_query(agent, status, channel, surface, query)
        table = Table("Task", "Agent", "Status", "Started", "Cost", title=f"[dim]{escape(visibility)}[/dim]")
        try:
            async for execution in client.list_workflows(visibility, limit=limit):
                attrs = execution.typed_search_attributes
                table.add_row(
                    escape(execution.id),
                    escape(attrs.get(search.AGENT) or ""),
                    _status_of(execution),
                    _when(execution.start_time),
                    _usd(attrs.get(search.COST_USD)),
                )
        except RPCError as exc:
            raise _Fail(
                f"the visibility query was refused: {exc.message} (are the OpenLoop search "
                "attributes registered? `openloop setup` adds them)",
                EXIT_UNAVAILABLE,
            ) from None
        _out().print(table if table.row_count else f"No tasks match {visibility}")

    _run(work)


def web_ui_link(settings: Settings, namespace: str, task_id: str) -> str:
    workflow = quote(task_id, safe="")
    return f"http://localhost:{settings.temporal_ui_port}/namespaces/{quote(namespace)}/workflows/{workflow}"


def _timeline(entries: list[Entry]) -> Table:
    table = Table("When", "Step", "Kind", "What", "Who", "Cost")
    for entry in entries:
        table.add_row(
            _when(entry.at),
            str(entry.step) if entry.step is not None else "",
            entry.kind,
            escape(entry.what),
            escape(entry.who or ""),
            _usd(entry.cost_usd) if entry.cost_usd else "",
        )
    return table


@tasks_app.command("show")
def show(task_id: Annotated[str, typer.Argument(help="The task (workflow) id.")]) -> None:
    """A task step by step: model calls, tools, approvals (who and when) and cost per step."""

    async def work(settings: Settings, client: Client | None) -> None:
        assert client is not None
        description = await describe_task(client, task_id)
        running = description.status == WorkflowExecutionStatus.RUNNING
        asked = await ask_task(client, task_id, description.task_queue)
        story = story_from_history((await histories.fetch_history(client, task_id)).events)
        attrs, out = description.typed_search_attributes, _out()
        out.print(
            f"[bold]{escape(task_id)}[/bold]  agent {escape(attrs.get(search.AGENT) or '?')}  "
            f"on {escape(attrs.get(search.SURFACE) or '?')} {escape(attrs.get(search.CHANNEL) or '')}"
        )
        if story.task is not None:
            out.print(f"Request by {escape(story.task.context.user)}: {escape(story.task.request[:300])}")
        if asked is not None and running:
            surface = attrs.get(search.SURFACE) or ""
            doing, action = while_running(asked[1], surface)
            out.print(f"Status {asked[1].status.value} (live): {escape(doing)}")
            out.print(f"Next: {escape(commands(action))}")
        else:
            out.print(f"Status {escape(_story_status(story, description))}")
        out.print(_timeline(with_refusals(story.entries, asked[0]) if asked else story.entries))
        out.print(f"Total cost {_usd(story.cost_usd)}")
        out.print(f"Web UI: {web_ui_link(settings, client.namespace, task_id)}")

    _run(work)


def _story_status(story: Story, description: Any) -> str:
    if story.result is not None:
        approvals = [entry.what for entry in story.entries if entry.kind == "approval"]
        reason = qualified_reason(story.result.status, story.result.reason, approvals)
        return f"{story.result.status.value}: {reason}"
    if story.closed:
        return story.closed.upper()
    status = description.typed_search_attributes.get(search.STATUS) or "RUNNING"
    return f"{status} (no worker answered; from the history)"


def explain(task_id: Annotated[str, typer.Argument(help="The task (workflow) id.")]) -> None:
    """Why a task is where it is: status, reason, what to do next, and every decision on the way."""

    async def work(settings: Settings, client: Client | None) -> None:
        assert client is not None
        description = await describe_task(client, task_id)
        asked = await ask_task(client, task_id, description.task_queue)
        running = description.status == WorkflowExecutionStatus.RUNNING
        if asked is not None and not running and not asked[0].status.finished:
            asked = None  # terminated or timed out mid-way: only the history tells how it ended
        story = story_from_history((await histories.fetch_history(client, task_id)).events)
        surface = description.typed_search_attributes.get(search.SURFACE) or ""
        if asked is not None:
            explanation, view = asked
            status, reason, action = explanation.status.value, explanation.reason, explanation.next_action
            reason = reason.removeprefix(f"stopped: {status}: ")  # the last decision says it stopped
            if not explanation.status.finished:
                reason, action = while_running(view, surface)
            chain, source = decision_chain(story, explanation), "the task itself"
        else:
            recorded = description.typed_search_attributes.get(search.STATUS) or "RUNNING"
            status, reason, action = explain_story(story, task_id, recorded)
            chain, source = decision_chain(story), "its recorded history"
        if status in TaskStatus.__members__:
            known = TaskStatus(status)
            approvals = [entry.what for entry in story.entries if entry.kind == "approval"]
            reason = qualified_reason(known, reason, approvals)
            if known.finished:
                action = next_action(known, task_id, surface=surface) or action
        out = _out()
        out.print(f"[bold]{escape(task_id)}[/bold]: {status}")
        out.print(f"Reason: {escape(reason or '–')}")
        out.print(f"Next: {escape(commands(action) if action else '–')}")
        out.print(f"Decisions (from {source}):")
        for number, decision in enumerate(chain, 1):
            out.print(f"  {number}. {escape(decision)}")

    _run(work)


def parse_since(text: str) -> timedelta:
    match = _DURATION.match(text.strip())
    if not match:
        raise _Fail(f"--since {text!r}: use a number and a unit, e.g. 30m, 12h, 7d, 2w", EXIT_UNAVAILABLE)
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def replay(
    task_id: Annotated[str | None, typer.Argument(help="Replay this task's latest run.")] = None,
    history: Annotated[Path | None, typer.Option("--history", help="A JSON history file.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every task started since --since.")] = False,
    since: Annotated[str, typer.Option(help="With --all: how far back, e.g. 7d, 12h.")] = "7d",
) -> None:
    """Replay recorded histories against this code; report determinism errors and where they diverge."""
    if sum((task_id is not None, history is not None, all_)) != 1:
        Console(stderr=True).print("[red]error:[/red] give exactly one of TASK_ID, --history FILE or --all")
        raise typer.Exit(EXIT_UNAVAILABLE)

    async def work(settings: Settings, client: Client | None) -> int:
        source: list[WorkflowHistory] | Any
        if history is not None:
            try:
                source = [histories.load_history(history)]
            except ValueError as exc:
                raise _Fail(str(exc), EXIT_FAILED) from None
        elif task_id is not None:
            assert client is not None
            await describe_task(client, task_id)
            source = [await histories.fetch_history(client, task_id)]
        else:
            assert client is not None
            after = datetime.now(UTC) - parse_since(since)
            source = histories.histories_matching(client, histories.task_query(since=after))
        reports = await histories.replay(source)
        out = _out()
        for report in reports:
            if report.ok:
                out.print(f"[green]OK[/green]   {escape(report.workflow_id)} (run {report.run_id})")
                continue
            out.print(f"[red]FAIL[/red] {escape(report.workflow_id)} (run {report.run_id})")
            out.print(f"     {report.error_type}: {escape(report.error or '')}", soft_wrap=True)
            out.print(f"     diverged at {escape(report.diverged_at or 'an unknown event')}", soft_wrap=True)
        failed = sum(not report.ok for report in reports)
        out.print(f"{len(reports)} replayed, {failed} failed" if reports else "No histories to replay.")
        return EXIT_FAILED if failed else 0

    code = _run(work, needs_client=history is None)
    if code:
        raise typer.Exit(code)
