"""`openloop playbooks apply|runs|show|schedule`: playbooks on the stack.

`apply` compiles the folder against the applied agents (nothing is stored when it has an
error), applies a Loopy project's own skills and agents (`activities.playbooks.project_apply`),
stores a new version of each playbook whose content hash changed, retires the ones whose
files are gone, and reconciles the Temporal Schedules of cron playbooks and `poll=`
sensors (a schedule each, starting `PlaybookSensorPollWorkflow`); `openloop up` applies
`./playbooks` the same way at start (`apply_folder`). `runs` reads the runs' rows in Postgres;
`show` tells one run's story (`surfaces.cli.playbook_story`: each step's task, live while it
runs); `schedule pause|unpause|trigger|backfill NAME` acts on a cron playbook's schedule.
Exit codes: 0 ok, 1 compile errors or not found, 2 no stack.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy
from temporalio.service import RPCError

from activities.offline.playbook import offline_unknowns
from activities.playbooks.apply import apply_playbooks
from activities.playbooks.project_apply import apply_project, foreign_agents
from activities.playbooks.schedules import DEFAULT_OVERLAP, OVERLAP_POLICIES, schedule_gone, schedule_id
from activities.store import playbooks as playbook_rows
from activities.store.agents import latest_agents
from config.settings import Settings
from surfaces.cli.memory import EXIT_NOT_FOUND, fail, run_with_pool, who
from surfaces.cli.playbook_story import COLOURS, RunStory, draw_run, read_run_story
from surfaces.cli.playbooks import DEFAULT_DIR, compile_folder, playbooks_app, print_report
from surfaces.cli.terminal import commands
from surfaces.client import connect
from workflows.playbook_calls import SensorPoll
from workflows.playbook_types import StepStatus

T = TypeVar("T")
EXIT_NO_STACK = 2
console = Console(emoji=False, highlight=False, soft_wrap=True)
schedule_app = typer.Typer(help="A cron playbook's Temporal Schedule.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """`openloop` wires this module in; its commands join the `playbooks` group."""
    register_runs(playbooks_app)


def register_runs(group: typer.Typer) -> None:
    group.command("apply")(apply_command)
    group.command("runs")(runs_command)
    group.command("show")(show_command)
    group.add_typer(schedule_app, name="schedule")


def with_stack(work: Callable[[AsyncConnectionPool, Client], Awaitable[T]]) -> T:
    """Run `work` with the database and a Temporal client (exit 2 when either is missing)."""

    async def both(pool: AsyncConnectionPool) -> T:
        try:
            client = await connect(Settings.from_env())
        except RuntimeError as exc:
            raise fail(str(exc), EXIT_NO_STACK) from None
        return await work(pool, client)

    return run_with_pool(both)


async def apply_folder(
    pool: AsyncConnectionPool,
    client: Client,
    folder: Path,
    task_queue: str,
    overlap: str = DEFAULT_OVERLAP,
    applied_by: str = "",
    out: Console = console,
) -> bool:
    """Compile `folder` against the applied agents and, when it has no error, store its playbooks
    and reconcile their schedules and poll sensors, saying what changed; False on errors."""
    configs = [stored.config for stored in await latest_agents(pool)]
    report = await asyncio.to_thread(compile_folder, folder, configs)
    where = await asyncio.to_thread(folder.resolve)
    if not report.ok:
        print_report(report, out)
        out.print("[red]nothing applied: fix the errors above first[/red]")
        return False
    for warning in report.warnings:
        out.print(f"[yellow]![/yellow] {escape(str(warning))}")
    taken = await foreign_agents(pool, report.agent_configs)
    if taken:
        out.print(
            f"[red]nothing applied: agent(s) {escape(', '.join(taken))} exist and were not made from a "
            "registry; rename the registry's agents (or remove those agents) first[/red]"
        )
        return False
    project = await apply_project(pool, report.agent_configs, report.skills, applied_by or who())
    for label, names in (("skill", project.skills), ("agent", project.agents)):
        for name in names:
            out.print(f"{label:>10}  {escape(name)}")
    events = list(report.events.values())
    polls = [
        (SensorPoll(ref=s.ref, emits=s.emits, folder=str(where)), s.poll_seconds)
        for s in report.sensors
        if s.poll_seconds is not None
    ]
    done = await apply_playbooks(
        client, pool, report.playbooks, events, task_queue, overlap, applied_by or who(), polls
    )
    stored, schedules = done.stored, done.schedules
    for label, names in (
        ("stored", stored.created),
        ("unchanged", stored.unchanged),
        ("retired", stored.retired),
    ):
        for name in names:
            out.print(f"{label:>10}  {escape(name)}")
    for label, names in (
        ("created", schedules.created), ("updated", schedules.updated), ("deleted", schedules.deleted),
    ):  # fmt: skip
        for name in names:
            out.print(f"{'schedule':>10}  {escape(name)} {label} ({schedule_id(name)})")
    for label, names in (
        ("created", done.polls.created), ("updated", done.polls.updated), ("deleted", done.polls.deleted),
    ):  # fmt: skip
        for name in names:
            out.print(f"{'poll':>10}  sensor {escape(name)} {label}")
    out.print(f"[green]✓[/green] {len(report.playbooks)} playbook(s) applied from {escape(str(folder))}")
    return True


def apply_command(
    folder: Annotated[Path, typer.Option("--dir", help="The playbooks folder")] = DEFAULT_DIR,
    overlap: Annotated[
        str,
        typer.Option(help=f"When a firing finds the last run still going: {', '.join(OVERLAP_POLICIES)}"),
    ] = DEFAULT_OVERLAP,
) -> None:
    """Store the folder's playbooks (a new version when one changed) and sync their schedules."""
    if overlap not in OVERLAP_POLICIES:
        raise fail(f"--overlap {overlap!r}: choose one of {', '.join(OVERLAP_POLICIES)}", 1)
    if not folder.is_dir():
        raise fail(f"no folder {folder}: pass --dir, or start one with `openloop playbooks init`", 1)
    settings = Settings.from_env()

    async def work(pool: AsyncConnectionPool, client: Client) -> bool:
        return await apply_folder(pool, client, folder, settings.task_queue, overlap)

    if not with_stack(work):
        raise typer.Exit(1)


def runs_command(
    playbook: Annotated[
        str | None, typer.Option("--playbook", "-p", help="Only this playbook's runs")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first")] = 20,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The latest playbook runs: status, event, steps done, cost."""
    runs = run_with_pool(lambda pool: playbook_rows.list_runs(pool, playbook, limit))
    if as_json:
        print(json.dumps([r.record.model_dump(mode="json") for r in runs], indent=2))
        return
    if not runs:
        console.print("no playbook runs yet" + (f" of {escape(playbook)}" if playbook else ""))
        return
    for run in runs:  # the id whole on its own line, to copy into `show` or `explain`
        record = run.record
        done = sum(step.status is StepStatus.SUCCEEDED for step in record.steps)
        offline = sum(offline_unknowns(step.answer) is not None for step in record.steps)
        colour = COLOURS.get(record.status.value, "white")
        started = run.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        console.print(f"[bold]{escape(record.run_id)}[/bold]")
        console.print(
            f"  {escape(record.playbook)} v{record.version} · [{colour}]{record.status.value}[/] · "
            f"on {escape(record.event_name)} · {done}/{len(record.steps)} steps · "
            + (f"[yellow]{offline} answered offline[/] · " if offline else "")
            + f"${record.cost_usd:.4f} · {started}"
        )
    console.print("[dim]one run's steps: openloop playbooks show RUN (or openloop explain RUN)[/dim]")


def show_command(run_id: str, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """One run: its event, then each step in order with its task, status, output, cost and reason."""

    async def read(pool: AsyncConnectionPool, client: Client) -> RunStory | None:
        return await read_run_story(pool, client, run_id)

    story = with_stack(read)
    if story is None:
        raise fail(f"no playbook run {run_id}: see `openloop playbooks runs`", EXIT_NOT_FOUND)
    record = story.record
    if as_json:
        print(json.dumps(record.model_dump(mode="json"), indent=2))
        return
    colour = COLOURS.get(record.status.value, "white")
    console.print(f"[bold]{escape(record.run_id)}[/bold]  {escape(record.playbook)} v{record.version}")
    console.print(f"status   [{colour}]{record.status.value}[/]: {escape(story.reason)}")
    if story.action:
        console.print(f"next     {escape(commands(story.action))}")
    console.print(
        f"event    {escape(record.event_name)} (key {escape(record.run_key)}, depth {record.depth})"
    )
    console.print(f"fields   {escape(json.dumps(record.event, ensure_ascii=False))}")
    console.print(f"cost     ${record.cost_usd:.4f}")
    console.print(draw_run(story), soft_wrap=False)


def _on_schedule(name: str, act: Callable[[Any], Awaitable[str]]) -> None:
    async def work(pool: AsyncConnectionPool, client: Client) -> str | None:
        handle = client.get_schedule_handle(schedule_id(name))
        try:
            return await act(handle)
        except RPCError as exc:
            if schedule_gone(exc):
                return None
            raise

    said = with_stack(work)
    if said is None:
        raise fail(f"no schedule for playbook {name}: is it applied, and on a cron?", EXIT_NOT_FOUND)
    console.print(f"[green]✓[/green] {escape(said)}")


@schedule_app.command()
def pause(name: str, note: Annotated[str, typer.Option(help="Why, for the next person")] = "") -> None:
    """Stop the schedule firing until it is unpaused."""

    async def act(handle: Any) -> str:
        await handle.pause(note=note or f"paused by {who()} with openloop playbooks schedule pause")
        return f"{name}: paused"

    _on_schedule(name, act)


@schedule_app.command()
def unpause(name: str) -> None:
    """Let a paused schedule fire again."""

    async def act(handle: Any) -> str:
        await handle.unpause(note=f"unpaused by {who()}")
        return f"{name}: unpaused"

    _on_schedule(name, act)


@schedule_app.command()
def trigger(name: str) -> None:
    """Run the playbook now, as if its schedule fired (the overlap policy applies)."""

    async def act(handle: Any) -> str:
        await handle.trigger()
        return f"{name}: triggered; see `openloop playbooks runs --playbook {name}`"

    _on_schedule(name, act)


@schedule_app.command()
def backfill(
    name: str,
    start: Annotated[datetime, typer.Option(help="From (UTC unless it says otherwise)")],
    end: Annotated[datetime, typer.Option(help="To (UTC unless it says otherwise)")],
) -> None:
    """Run the firings the schedule would have made between two times (e.g. while paused)."""
    begin, until = (t if t.tzinfo else t.replace(tzinfo=UTC) for t in (start, end))
    if until <= begin:
        raise fail("--end must be after --start", 1)

    async def act(handle: Any) -> str:
        # The end is exclusive in Temporal; a second more takes a firing at `end` itself.
        await handle.backfill(
            ScheduleBackfill(
                start_at=begin, end_at=until + timedelta(seconds=1), overlap=ScheduleOverlapPolicy.BUFFER_ALL
            )
        )  # one after another, however the schedule treats overlaps
        return f"{name}: backfilled {begin.isoformat()} to {until.isoformat()}"

    _on_schedule(name, act)
