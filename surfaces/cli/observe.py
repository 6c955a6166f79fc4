"""`openloop tasks list|show`, `openloop explain` and `openloop replay`: looking at tasks.

`tasks list` filters with the same visibility queries as the Web UI and `temporal workflow
list --query`. `tasks show` and `explain` ask a running task itself (queries) and read a
finished one from its recorded history, so they work with no worker running. `explain` of a
playbook run's id tells each step's task in order (`surfaces.cli.playbook_story`). `replay`
runs recorded histories against the code in this checkout, before a deploy.
Exit codes: 0 ok, 1 a failed replay or an unknown task, 2 Temporal unreachable or bad input.
`replay` itself is in `surfaces.cli.replay`; how each command runs and fails, in
`surfaces.cli.observe_run`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.markup import escape
from rich.table import Table
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from config.settings import Settings
from surfaces.cli.observe_run import EXIT_FAILED, EXIT_UNAVAILABLE, Fail, output, run
from surfaces.cli.playbook_story import find_run_story, print_explained
from surfaces.cli.replay import parse_since, replay
from surfaces.cli.task_tree import draw_tree, load_tree, rolled_up
from surfaces.cli.terminal import commands
from surfaces.decisions import status_of
from surfaces.task_lookup import (
    ask_task,
    decision_chain,
    describe_task,
    explain_story,
    qualified_reason,
    while_running,
    with_refusals,
)
from surfaces.timeline import Entry, EntryKind, Story, story_from_history
from workers import history as histories
from workflows import search
from workflows.outcomes import next_action
from workflows.types import TaskStatus

__all__ = [
    "EXIT_FAILED",
    "EXIT_UNAVAILABLE",
    "explain",
    "list_query",
    "list_tasks",
    "parse_since",
    "register",
    "replay",
    "show",
    "tasks_app",
    "web_ui_link",
]

tasks_app = typer.Typer(help="Agent tasks: list them, show one step by step.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
    app.command("explain")(explain)
    app.command("replay")(replay)


def _quoted(value: str) -> str:
    if "'" in value or "\\" in value:
        raise Fail(f"{value!r}: quotes and backslashes are not allowed in a filter", EXIT_UNAVAILABLE)
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
            raise Fail(f"unknown status {status!r}; one of {known}", EXIT_UNAVAILABLE) from None
    return histories.task_query(extra=" AND ".join(clauses + ([extra] if extra else [])) or None)


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
                    status_of(execution),
                    _when(execution.start_time),
                    _usd(attrs.get(search.COST_USD)),
                )
        except RPCError as exc:
            raise Fail(
                f"the visibility query was refused: {exc.message} (are the OpenLoop search "
                "attributes registered? `openloop setup` adds them)",
                EXIT_UNAVAILABLE,
            ) from None
        output().print(table if table.row_count else f"No tasks match {visibility}")

    run(work)


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
        tree = await load_tree(client, task_id, story)
        told = rolled_up(tree)  # with its subagents' and teammates' steps, and their cost
        attrs, out = description.typed_search_attributes, output()
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
        if tree.children:
            out.print(draw_tree(tree))
        out.print(_timeline(with_refusals(told.entries, asked[0]) if asked else told.entries))
        out.print(f"Total cost {_usd(told.cost_usd)}" + (" with its children" if tree.children else ""))
        out.print(f"Web UI: {web_ui_link(settings, client.namespace, task_id)}")

    run(work)


def _story_status(story: Story, description: Any) -> str:
    if story.result is not None:
        approvals = [entry.what for entry in story.entries if entry.kind is EntryKind.APPROVAL]
        reason = qualified_reason(story.result.status, story.result.reason, approvals)
        return f"{story.result.status.value}: {reason}"
    if story.closed:
        return story.closed.upper()
    status = description.typed_search_attributes.get(search.STATUS) or "RUNNING"
    return f"{status} (no worker answered; from the history)"


def explain(task_id: Annotated[str, typer.Argument(help="The task or playbook run id.")]) -> None:
    """Why a task is where it is: status, reason, what to do next, and every decision on the way
    (for a playbook run: each step's task, status, output, cost and reason, in order)."""

    async def work(settings: Settings, client: Client | None) -> None:
        assert client is not None
        run_story = await find_run_story(settings.database_url, client, task_id)
        if run_story is not None:  # a playbook run: its steps' tasks, in order
            print_explained(run_story, output())
            return
        description = await describe_task(client, task_id)
        asked = await ask_task(client, task_id, description.task_queue)
        running = description.status == WorkflowExecutionStatus.RUNNING
        if asked is not None and not running and not asked[0].status.finished:
            asked = None  # terminated or timed out mid-way: only the history tells how it ended
        story = story_from_history((await histories.fetch_history(client, task_id)).events)
        told = rolled_up(await load_tree(client, task_id, story))  # children's decisions too
        surface = description.typed_search_attributes.get(search.SURFACE) or ""
        if asked is not None:
            explanation, view = asked
            status, reason, action = explanation.status.value, explanation.reason, explanation.next_action
            reason = reason.removeprefix(f"stopped: {status}: ")  # the last decision says it stopped
            if not explanation.status.finished:
                reason, action = while_running(view, surface)
            chain, source = decision_chain(told, explanation), "the task itself"
        else:
            recorded = description.typed_search_attributes.get(search.STATUS) or "RUNNING"
            status, reason, action = explain_story(story, task_id, recorded)
            chain, source = decision_chain(told), "its recorded history"
        if status in TaskStatus.__members__:
            known = TaskStatus(status)
            approvals = [entry.what for entry in story.entries if entry.kind is EntryKind.APPROVAL]
            reason = qualified_reason(known, reason, approvals)
            if known.finished:
                action = next_action(known, task_id, surface=surface) or action
        out = output()
        out.print(f"[bold]{escape(task_id)}[/bold]: {status}")
        out.print(f"Reason: {escape(reason or '–')}")
        out.print(f"Next: {escape(commands(action) if action else '–')}")
        out.print(f"Decisions (from {source}):")
        for number, decision in enumerate(chain, 1):
            out.print(f"  {number}. {escape(decision)}")
        if story.blocked:  # what its commands could not reach: often why a test run failed
            out.print("The sandbox's network allowlist refused:")
            for line in story.blocked:
                out.print(f"  [yellow]{escape(line)}[/yellow]")

    run(work)
