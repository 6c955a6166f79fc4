"""`openloop loops init|doctor|run|convert|status|logs|report|diff|list`: repair loops from the shell.

`run` starts the loop's workflow and follows it live (the running command's heartbeat and
each round's verdict) until it stops; Ctrl-C stops following, never the loop. The rest read
the loop's rows in Postgres and, while it runs, the workflow's progress query.
Exit codes: 0 ok (a loop that ended SUCCESS), 1 a loop that ended otherwise, 2 no stack,
3 not found, 4 an invalid loop file.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.store import loops as loop_rows
from config.loop import STARTER_LOOP
from config.settings import Settings
from surfaces.cli.loop_doctor import doctor as run_doctor
from surfaces.cli.loop_files import EXIT_INVALID, convert, load_loop
from surfaces.cli.loop_follow import follow, heartbeat, progress_view
from surfaces.cli.loop_views import ending, report_lines, round_table, running_line
from surfaces.cli.memory import EXIT_NOT_FOUND, fail, run_with_pool, who
from surfaces.cli.patch_paths import prefix_paths, repository_prefix
from surfaces.client import connect
from workflows.loop_types import LOOP_WORKFLOW_NAME, LoopInput, LoopResult, LoopSpec, RepoSource

LIST_HINT = "`openloop loops list` lists the loops"
DEMO_PROJECT = Path(__file__).resolve().parents[2] / "config" / "loops" / "demo-project"

loops_app = typer.Typer(
    help="Repair loops: play, scan, fix and verify a project until it works.", no_args_is_help=True
)
console = Console(emoji=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(loops_app, name="loops")


loops_app.command()(convert)


def _load(file: Path) -> LoopSpec:
    return load_loop(file, console)


async def _client(settings: Settings) -> Client:
    try:
        return await connect(settings)
    except RuntimeError as exc:
        raise fail(str(exc), 2) from None


@loops_app.command()
def init(
    folder: Annotated[Path, typer.Argument(help="Where to write loop.yaml and demo-project/")] = Path("."),
    agent: Annotated[
        str | None, typer.Option(help="Let this agent fix each round (e.g. coder) instead of a shell line.")
    ] = None,
) -> None:
    """Write a starter loop file and the small demo project it repairs."""
    loop_file, project = folder / "loop.yaml", folder / "demo-project"
    for path in (loop_file, project):
        if path.exists():
            raise fail(f"{path} already exists: choose another folder or move it away", 1)
    folder.mkdir(parents=True, exist_ok=True)
    # What a setup run in the shipped folder made (.venv/) is not the demo project.
    made = ("__pycache__", "*.pyc", ".venv", "*.egg-info")
    shutil.copytree(DEMO_PROJECT, project, ignore=shutil.ignore_patterns(*made))
    text = STARTER_LOOP.read_text()
    if agent is not None:
        text = text.replace(
            "    fix: python autofix.py {last_error} # a stand-in for a coding agent's command line",
            f"    fix: {{agent: {agent}}} # each fix round is a task of this agent, with its coding tools",
        )
    loop_file.write_text(text)
    console.print(f"[green]✓[/green] wrote {loop_file} and {project}/ (a calculator with one failing test)")
    console.print(f"next: openloop loops doctor {loop_file}   then   openloop loops run {loop_file}")


@loops_app.command()
def doctor(
    file: Annotated[Path, typer.Argument(help="A loop file, an openloop.json or its folder.")],
) -> None:
    """Check a loop can run here: its file, commands, repository, credentials and sandbox."""
    spec = _load(file)
    checks = asyncio.run(run_doctor(spec, Settings.from_env()))
    for check in checks:
        mark = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
        console.print(f"{mark} {check.name}: {escape(check.detail)}")
    if not all(check.ok for check in checks):
        raise typer.Exit(EXIT_INVALID)


@loops_app.command()
def run(
    file: Annotated[Path, typer.Argument(help="A loop file, an openloop.json or its folder.")],
    local: Annotated[
        Path | None, typer.Option(help="Repair this local folder instead of the file's repo.")
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="Start it and return; follow with `loops status`.")
    ] = False,
) -> None:
    """Start a loop and follow it until it stops."""
    spec = _load(file)
    if local is not None:
        spec = spec.model_copy(update={"repo": RepoSource(path=str(local.resolve()))})
    loop_id = f"loop-{spec.name}-{uuid.uuid4().hex[:8]}"
    settings = Settings.from_env()

    async def start() -> int:
        client = await _client(settings)
        handle = await client.start_workflow(
            LOOP_WORKFLOW_NAME,
            LoopInput(
                loop_id=loop_id, spec=spec, started_by=f"cli:{who()}", loop_queue=settings.loop_task_queue
            ),
            id=loop_id,
            task_queue=settings.task_queue,
            result_type=LoopResult,
        )
        console.print(
            f"started {loop_id} ({spec.name}); Web UI: http://localhost:{settings.temporal_ui_port}"
        )
        if detach:
            console.print(f"follow it: openloop loops status {loop_id}")
            return 0
        return await follow(client, handle, console)

    raise typer.Exit(asyncio.run(start()))


@loops_app.command()
def status(
    loop_id: str,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    watching: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep watching until the loop stops.")
    ] = False,
) -> None:
    """Where a loop is: its running command (pid, elapsed, output, ETA) and its rounds so far."""
    if watching:

        async def watch() -> int:
            client = await _client(Settings.from_env())
            return await follow(client, client.get_workflow_handle(loop_id, result_type=LoopResult), console)

        raise typer.Exit(asyncio.run(watch()))

    async def read() -> dict[str, Any]:
        client = await _client(Settings.from_env())
        handle = client.get_workflow_handle(loop_id)
        try:
            running = (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        except RPCError:
            running = False
        view = await progress_view(handle) if running else None
        beat = await heartbeat(client, handle) if running else None
        row, reports = await _stored(loop_id)
        return {"view": view, "heartbeat": beat, "row": row, "reports": reports}

    found = asyncio.run(read())
    row, reports = found["row"], found["reports"]
    if row is None and found["view"] is None:
        raise fail(f"no loop {loop_id!r}: {LIST_HINT}", EXIT_NOT_FOUND)
    if as_json:
        view = found["view"]
        print(
            json.dumps(
                {
                    "loop_id": loop_id,
                    "status": row["status"] if row else "RUNNING",
                    "reason": row["reason"] if row else "",
                    "next_action": row["next_action"] if row else "",
                    "running": None if view is None else view.model_dump(mode="json"),
                    "heartbeat": found["heartbeat"],
                    "rounds": [r.model_dump(mode="json") for r in reports],
                },
                indent=2,
                default=str,
            )
        )
        return
    if found["view"] is not None and row is not None and row["status"] == "RUNNING":
        console.print(running_line(found["view"], found["heartbeat"]))
    if reports:
        console.print(round_table(reports))
    if row is not None and row["status"] != "RUNNING":
        for line in ending(row["status"], row["reason"], row["next_action"]):
            console.print(line)


async def _stored(loop_id: str) -> tuple[dict[str, Any] | None, list[Any]]:
    from activities.store.db import close_pools, get_pool

    url = Settings.from_env().require_database_url()
    pool = await get_pool(url)
    try:
        return await loop_rows.loop_row(pool, loop_id), await loop_rows.reports(pool, loop_id)
    finally:
        await close_pools()


@loops_app.command()
def logs(
    loop_id: str,
    round_: Annotated[int | None, typer.Option("--round", help="Only this round.")] = None,
    step: Annotated[
        str | None,
        typer.Option(help="Only this step: setup (round 0), play, scan, fix, verify, baseline, improve."),
    ] = None,
) -> None:
    """Print the stored output of a loop's commands."""
    outputs = run_with_pool(lambda pool: loop_rows.outputs(pool, loop_id, round_, step))
    if not outputs:
        where = f"{loop_id!r}" + (f" round {round_}" if round_ else "")
        raise fail(f"no stored output for {where}: {LIST_HINT}", EXIT_NOT_FOUND)
    for output in outputs:
        console.rule(f"round {output['round']} · {output['step']}")
        if output["truncated"]:
            console.print("[dim](only the last part of this output was kept)[/dim]")
        console.out(bytes(output["output"]).decode(errors="replace"), highlight=False)


@loops_app.command()
def report(loop_id: str, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Print each round's report: commands, exit codes, durations, failing tests, verdict."""
    reports = run_with_pool(lambda pool: loop_rows.reports(pool, loop_id))
    if not reports:
        raise fail(f"no finished rounds for {loop_id!r}: {LIST_HINT}", EXIT_NOT_FOUND)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in reports], indent=2))
        return
    for one in reports:
        for line in report_lines(one):
            console.print(line)


@loops_app.command()
def diff(loop_id: str) -> None:
    """Print the loop's change (its last round's diff from the base), ready for `git apply`:
    for a project in a folder of another repository (`loops init` in a clone), named from that
    repository's top, so `git -C FOLDER apply` and `git apply` at the top both take it."""

    async def read(pool: Any) -> tuple[bytes | None, str | None]:
        reports = await loop_rows.reports(pool, loop_id)
        last = next((r.diff for r in reversed(reports) if r.diff is not None), None)
        row = await loop_rows.loop_row(pool, loop_id)
        folder = ((row or {}).get("spec") or {}).get("repo", {}).get("path")
        return (None if last is None else await loop_rows.load_diff(pool, last.sha256)), folder

    patch, folder = run_with_pool(read)
    if patch is None:
        raise fail(f"no stored diff for {loop_id!r}: {LIST_HINT}", EXIT_NOT_FOUND)
    patch = prefix_paths(patch, repository_prefix(folder))
    sys.stdout.flush()
    sys.stdout.buffer.write(patch)  # the exact bytes: a binary part must reach `git apply` whole
    sys.stdout.buffer.flush()


@loops_app.command("list")
def list_loops() -> None:
    """The most recent loops and how each ended."""
    rows = run_with_pool(loop_rows.recent_loops)
    for row in rows:
        console.print(
            f"{row['loop_id']:<40} {row['status']:<12} {row['rounds']:>3} round(s)  {escape(row['reason'])}"
        )
