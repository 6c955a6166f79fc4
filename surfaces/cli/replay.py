"""`openloop replay`: run recorded histories against the code in this checkout (one task, a
JSON history file, or every task since `--since`), and `parse_since` for that option.
Registered by `surfaces.cli.observe`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from temporalio.client import Client, WorkflowHistory

from config.settings import Settings
from surfaces.cli.observe_run import EXIT_FAILED, EXIT_UNAVAILABLE, Fail, output, run
from surfaces.task_lookup import describe_task
from workers import history as histories

_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str) -> timedelta:
    match = _DURATION.match(text.strip())
    if not match:
        raise Fail(f"--since {text!r}: use a number and a unit, e.g. 30m, 12h, 7d, 2w", EXIT_UNAVAILABLE)
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def replay(
    task_id: Annotated[str | None, typer.Argument(help="Replay this task's latest run.")] = None,
    history: Annotated[Path | None, typer.Option("--history", help="A JSON history file.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every task started since --since.")] = False,
    since: Annotated[str, typer.Option(help="With --all: how far back, e.g. 7d, 12h.")] = "7d",
) -> None:
    """Replay recorded histories against this code; report determinism errors and where they diverge."""
    if sum((task_id is not None, history is not None, all_)) != 1:
        Console(emoji=False, stderr=True).print(
            "[red]error:[/red] give exactly one of TASK_ID, --history FILE or --all"
        )
        raise typer.Exit(EXIT_UNAVAILABLE)

    async def work(settings: Settings, client: Client | None) -> int:
        source: list[WorkflowHistory] | Any
        if history is not None:
            try:
                source = [histories.load_history(history)]
            except ValueError as exc:
                raise Fail(str(exc), EXIT_FAILED) from None
        elif task_id is not None:
            assert client is not None
            await describe_task(client, task_id)
            source = [await histories.fetch_history(client, task_id)]
        else:
            assert client is not None
            after = datetime.now(UTC) - parse_since(since)
            source = histories.histories_matching(client, histories.task_query(since=after))
        reports = await histories.replay(source)
        out = output()
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

    code = run(work, needs_client=history is None)
    if code:
        raise typer.Exit(code)
