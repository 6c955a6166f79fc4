"""`openloop tasks export ID`: a task's whole run as lines of JSON (`surfaces.task_export_format`).

The history comes from Temporal (decoded with the workers' data converter) and the messages
each model call sent from the transcript in Postgres; with no database configured the export
still runs, its `messages` null, and says so on stderr. A child (subagent or teammate) is a
`child` record; `--with-children` puts each child's own records in too, tagged by its
`task_id`, in time order with the parent's. `load_export` reads a file back as typed records.
Exit codes: 0 exported, 1 no such task, 2 Temporal unreachable or bad input.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from psycopg import AsyncConnection
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from activities.store import transcript
from activities.store.db import close_pools, get_pool
from config.settings import Settings
from surfaces.cli.errors import require_database, say
from surfaces.cli.observe import tasks_app
from surfaces.cli.observe_run import EXIT_UNAVAILABLE, Fail, run
from surfaces.cli.terminal import make_console
from surfaces.task_export_calls import at_of
from surfaces.task_export_format import ChildRecord, Header, Record, TaskExport, dump_export, load_export
from surfaces.task_export_history import records_from_history
from surfaces.task_export_steps import REFUSED_SQL, RefusedRow, in_time_order
from surfaces.task_lookup import describe_task
from workers import history as histories
from workflows.types import TaskInput

__all__ = ["build_export", "dump_export", "export", "load_export", "register"]

FORMATS = ("ndjson",)
MAX_RUNS = 10_000  # a task's runs followed back through continue-as-new
MAX_CHILDREN_DEPTH = 8  # a tree is bounded deeper than this by the task tree's own limit


def register(app: typer.Typer) -> None:
    """`export` joins the `tasks` group (`surfaces.cli.observe`)."""
    tasks_app.command("export")(export)


def export(
    task_id: Annotated[str, typer.Argument(help="The task (workflow) id.")],
    format: Annotated[str, typer.Option("--format", help="The line format: ndjson.")] = "ndjson",  # noqa: A002
    out: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    with_children: Annotated[
        bool, typer.Option("--with-children", help="Put subagents' and teammates' records in too.")
    ] = False,
) -> None:
    """A task's whole run as versioned JSON lines: steps, the messages each model call sent,
    tool calls and results, approvals, steering, children, costs. Secrets are masked."""
    if format not in FORMATS:
        say(f"--format {format!r}: not a format this version writes; use one of {', '.join(FORMATS)}")
        raise typer.Exit(EXIT_UNAVAILABLE)

    async def work(settings: Settings, client: Client | None) -> None:
        assert client is not None
        try:
            done = await build_export(client, settings.database_url, task_id, with_children, exported_at())
        finally:
            await close_pools()
        text = dump_export(done)
        if out is None:
            sys.stdout.write(text)
            return
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise Fail(f"{out}: cannot write the export ({exc.strerror})", EXIT_UNAVAILABLE) from None
        make_console(stderr=True).print(f"Exported {len(done.records)} records of {task_id} to {out}")

    run(work)


def exported_at() -> str:
    """Now, or SOURCE_DATE_EPOCH when set: two exports of a finished task are then identical."""
    pinned = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if pinned:
        try:
            return at_of(datetime.fromtimestamp(int(pinned), UTC))
        except ValueError:
            raise Fail(f"SOURCE_DATE_EPOCH={pinned!r}: not a number of seconds", EXIT_UNAVAILABLE) from None
    return at_of(datetime.now(UTC))


async def build_export(
    client: Client, database_url: str | None, task_id: str, with_children: bool, at: str
) -> TaskExport:
    """The export of `task_id` (and, with `with_children`, of every task below it)."""
    await describe_task(client, task_id)  # no such task: TaskNotFound, one line, exit 1
    rows = _Rows(database_url)
    first, records = await _task_records(client, rows, task_id)
    told = [records]
    queue = [(r.child_task_id, 1) for r in records if isinstance(r, ChildRecord)] if with_children else []
    while queue:
        child_id, depth = queue.pop(0)
        _, child_records = await _task_records(client, rows, child_id)
        told.append(child_records)
        if depth < MAX_CHILDREN_DEPTH:
            queue += [(r.child_task_id, depth + 1) for r in child_records if isinstance(r, ChildRecord)]
    if rows.missing:
        make_console(stderr=True).print(
            "No database configured (OPENLOOP_DATABASE_URL): each model call's `messages` is null."
        )
    numbered = in_time_order(told)
    header = Header(
        task_id=task_id,
        agent=first.agent.name if first is not None else None,
        agent_version=first.agent_version if first is not None else None,
        exported_at=at,
        with_children=with_children,
    )
    return TaskExport(header, numbered)


async def _task_records(client: Client, rows: _Rows, task_id: str) -> tuple[TaskInput | None, list[Record]]:
    events = await _every_run(client, task_id)
    stored, refused = await rows.load(task_id)
    return records_from_history(task_id, events, stored, refused)


async def _every_run(client: Client, task_id: str) -> list[HistoryEvent]:
    """The events of every run of the task, oldest first (a long task continues as new)."""
    runs = [list((await histories.fetch_history(client, task_id)).events)]
    while runs[0] and len(runs) < MAX_RUNS:
        earlier = runs[0][0].workflow_execution_started_event_attributes.continued_execution_run_id
        if not earlier:
            break
        runs.insert(0, list((await histories.fetch_history(client, task_id, earlier)).events))
    return [event for run in runs for event in run]


class _Rows:
    """What Postgres holds of each task: its transcript (the messages each model call sent)
    and its refused tool calls (audit ledger); None and none when no database is configured."""

    def __init__(self, database_url: str | None) -> None:
        self.url, self.missing, self.checked = database_url, not database_url, False

    async def load(self, task_id: str) -> tuple[list[dict[str, Any]] | None, list[RefusedRow]]:
        if not self.url:
            return None, []
        if not self.checked:  # down: one line at once, not after the pool's wait
            await asyncio.to_thread(require_database, self.url)
            self.checked = True
        pool = await get_pool(self.url)
        async with pool.connection() as conn:
            stored = await transcript.load(conn, task_id, 2**31 - 1)
            refused = await _refused(conn, task_id)
        return stored, refused


async def _refused(conn: AsyncConnection[Any], task_id: str) -> list[RefusedRow]:
    cursor = await conn.execute(REFUSED_SQL, (task_id,))
    return [RefusedRow(**row) for row in await cursor.fetchall()]  # the pool's rows are dicts
