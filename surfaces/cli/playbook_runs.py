"""`openloop playbooks apply|runs|show|schedule`: playbooks on the stack.

`apply` compiles the folder against the applied agents (nothing is stored when it has an
error), stores a new version of each playbook whose content hash changed, retires the ones
whose files are gone, and reconciles the Temporal Schedules of cron playbooks and `poll=`
sensors (a schedule each, starting `PlaybookSensorPollWorkflow`). `runs` and
`show` read the runs' rows in Postgres (a running run's steps come from its `progress`
query); `schedule pause|unpause|trigger|backfill NAME` acts on a cron playbook's schedule.
Exit codes: 0 ok, 1 compile errors or not found, 2 no stack.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.playbooks.apply import apply_playbooks
from activities.playbooks.schedules import DEFAULT_OVERLAP, OVERLAP_POLICIES, schedule_gone, schedule_id
from activities.store import playbooks as playbook_rows
from activities.store.agents import latest_agents
from config.settings import Settings
from surfaces.cli.memory import EXIT_NOT_FOUND, fail, run_with_pool, who
from surfaces.cli.playbooks import DEFAULT_DIR, compile_folder, playbooks_app, print_report
from surfaces.client import connect
from workflows.playbook_calls import SensorPoll
from workflows.playbook_types import StepRun, StepStatus

T = TypeVar("T")
EXIT_NO_STACK = 2
console = Console(highlight=False, soft_wrap=True)
schedule_app = typer.Typer(help="A cron playbook's Temporal Schedule.", no_args_is_help=True)
_COLOURS = {"SUCCEEDED": "green", "FAILED": "red", "SKIPPED": "yellow", "RUNNING": "cyan", "PENDING": "dim"}


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
        configs = [stored.config for stored in await latest_agents(pool)]
        report = compile_folder(folder, configs)
        if not report.ok:
            print_report(report)
            console.print("[red]nothing applied: fix the errors above first[/red]")
            return False
        for warning in report.warnings:
            console.print(f"[yellow]![/yellow] {escape(str(warning))}")
        events = list(report.events.values())
        polls = [
            (SensorPoll(ref=s.ref, emits=s.emits, folder=str(folder.resolve())), s.poll_seconds)
            for s in report.sensors
            if s.poll_seconds is not None
        ]
        done = await apply_playbooks(
            client, pool, report.playbooks, events, settings.task_queue, overlap, who(), polls
        )
        stored, schedules = done.stored, done.schedules
        for label, names in (
            ("stored", stored.created),
            ("unchanged", stored.unchanged),
            ("retired", stored.retired),
        ):
            for name in names:
                console.print(f"{label:>10}  {escape(name)}")
        for label, names in (
            ("created", schedules.created), ("updated", schedules.updated), ("deleted", schedules.deleted),
        ):  # fmt: skip
            for name in names:
                console.print(f"{'schedule':>10}  {escape(name)} {label} ({schedule_id(name)})")
        for label, names in (
            ("created", done.polls.created), ("updated", done.polls.updated), ("deleted", done.polls.deleted),
        ):  # fmt: skip
            for name in names:
                console.print(f"{'poll':>10}  sensor {escape(name)} {label}")
        console.print(
            f"[green]✓[/green] {len(report.playbooks)} playbook(s) applied from {escape(str(folder))}"
        )
        return True

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
    table = Table("run", "playbook", "status", "event", "steps", "cost", "started", box=None)
    for run in runs:
        record = run.record
        done = sum(step.status is StepStatus.SUCCEEDED for step in record.steps)
        colour = _COLOURS.get(record.status.value, "white")
        table.add_row(
            escape(record.run_id), f"{escape(record.playbook)} v{record.version}",
            f"[{colour}]{record.status.value}[/]", escape(record.event_name), f"{done}/{len(record.steps)}",
            f"${record.cost_usd:.4f}", run.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
        )  # fmt: skip
    console.print(table)


async def _progress(client: Client, run_id: str) -> list[StepRun] | None:
    """A running run's steps from its `progress` query; None when it is not running."""
    handle = client.get_workflow_handle(run_id)
    try:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return None
        return await handle.query("progress", result_type=list[StepRun])
    except RPCError:
        return None


def show_command(run_id: str, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """One run: its event, each step's status, output, cost and reason."""

    async def read(pool: AsyncConnectionPool, client: Client) -> tuple[Any, list[StepRun] | None]:
        return await playbook_rows.get_run(pool, run_id), await _progress(client, run_id)

    run, live = with_stack(read)
    if run is None:
        raise fail(f"no playbook run {run_id}: see `openloop playbooks runs`", EXIT_NOT_FOUND)
    record = run.record.model_copy(update={"steps": live}) if live is not None else run.record
    if as_json:
        print(json.dumps(record.model_dump(mode="json"), indent=2))
        return
    colour = _COLOURS.get(record.status.value, "white")
    console.print(f"[bold]{escape(record.run_id)}[/bold]  {escape(record.playbook)} v{record.version}")
    console.print(
        f"status   [{colour}]{record.status.value}[/]"
        + (f": {escape(record.reason)}" if record.reason else "")
    )
    console.print(
        f"event    {escape(record.event_name)} (key {escape(record.run_key)}, depth {record.depth})"
    )
    console.print(f"fields   {escape(json.dumps(record.event, ensure_ascii=False))}")
    console.print(f"cost     ${record.cost_usd:.4f}")
    for step in record.steps:
        step_colour = _COLOURS.get(step.status.value, "white")
        console.print(
            f"\n[bold]{escape(step.name)}[/bold]  [{step_colour}]{step.status.value}[/]  "
            f"${step.cost_usd:.4f}, {step.tokens} tokens"
            + (f"  task {escape(step.task_id)}" if step.task_id else "")
        )
        if step.attempts:
            console.print(f"  answers that did not validate: {step.attempts}")
        if step.output:
            console.print(f"  output  {escape(json.dumps(step.output, ensure_ascii=False))}")
        if step.reason:
            console.print(f"  reason  {escape(step.reason)}")


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
