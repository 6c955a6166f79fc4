"""`openloop eval run|capture`: run a dataset of cases as real tasks and gate on the result;
turn a finished task into a case.

Exit codes: 0 the run passed (at least `--min-pass-rate`), 1 it did not, 2 bad input or the
stack is not reachable.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from temporalio.client import Client

from activities.store.db import apply_migrations_async, close_pools, get_pool
from config.settings import Settings
from surfaces.cli.errors import say
from surfaces.cli.observe_run import EXIT_FAILED, EXIT_UNAVAILABLE, Fail, run
from surfaces.cli.terminal import make_console
from surfaces.evals.capture import capture_case, dump_case
from surfaces.evals.dataset import Dataset
from surfaces.evals.dataset_file import DatasetError, load_dataset
from surfaces.evals.junit import junit_xml
from surfaces.evals.report import changes, print_comparison, print_run, run_json
from surfaces.evals.results import CaseRun, EvalRun
from surfaces.evals.runner import RunOptions, run_dataset
from surfaces.evals.store import save_run
from surfaces.evals.target import Target, TargetError, resolve_target

eval_app = typer.Typer(
    help="Evaluate an agent on a dataset of cases; capture a task as a case.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")


def _new_run_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:6]}"


def _side(value: str) -> tuple[int | None, str | None]:
    """A `--compare` side: a version number (`2`, `v2`) or a model name."""
    text = value.removeprefix("v")
    return (int(text), None) if text.isdigit() else (None, value)


async def _targets(
    pool: AsyncConnectionPool, dataset: Dataset, agent: str, version: int | None, model: str | None
) -> tuple[Target, dict[str, Target]]:
    try:
        main = await resolve_target(pool, agent, version, model)
        names = {c.agent for c in dataset.cases if c.agent and c.agent != agent}
        others = {name: await resolve_target(pool, name, None, model) for name in sorted(names)}
    except TargetError as exc:
        raise Fail(str(exc), EXIT_UNAVAILABLE) from None
    return main, others


@eval_app.command("run")
def run_cmd(
    dataset_path: Annotated[Path, typer.Argument(metavar="DATASET", help="A YAML or JSONL file of cases.")],
    agent: Annotated[
        str | None, typer.Option("--agent", help="The agent (else the dataset's `agent:`).")
    ] = None,
    version: Annotated[
        int | None, typer.Option("--version", help="An applied version (default: latest).")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Run every case on this model instead.")
    ] = None,
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="Run each case K times.")] = 1,
    parallel: Annotated[int, typer.Option("--parallel", min=1, help="Cases running at once.")] = 4,
    budget_usd: Annotated[
        float | None, typer.Option("--budget-usd", min=0, help="Stop starting cases once this is spent.")
    ] = None,
    compare: Annotated[
        tuple[str, str] | None,
        typer.Option("--compare", help="Run two versions (2 3) or two models (A B) on the same cases."),
    ] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")] = None,
    min_pass_rate: Annotated[
        float, typer.Option("--min-pass-rate", min=0, max=1, help="Exit 1 below this pass rate (0-1).")
    ] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run each case as a real task on the running stack and check what it did."""
    try:
        dataset = load_dataset(dataset_path)
    except DatasetError as exc:
        say(f"{dataset_path}: not a valid dataset:\n{exc}")
        raise typer.Exit(EXIT_UNAVAILABLE) from None
    named = [c.agent for c in dataset.cases if c.agent]
    # A captured case names its agent: a dataset of them needs no --agent.
    name = agent or dataset.agent or (named[0] if len(named) == len(dataset.cases) else None)
    if name is None:
        say(f"{dataset_path}: name the agent: --agent NAME, or `agent:` at the top of the dataset")
        raise typer.Exit(EXIT_UNAVAILABLE)
    sides = [_side(compare[0]), _side(compare[1])] if compare else [(version, model)]
    options = RunOptions(repeat=repeat, parallel=parallel, budget_usd=budget_usd)
    out = make_console(stderr=as_json)

    async def work(settings: Settings, client: Client | None) -> list[EvalRun]:
        assert client is not None
        url = settings.require_database_url()
        try:
            await apply_migrations_async(url)  # the eval tables, on a stack started before them
            pool = await get_pool(url)
            runs: list[EvalRun] = []
            for side_version, side_model in sides:
                target, others = await _targets(
                    pool, dataset, name, side_version or version, side_model or model
                )
                out.print(f"Running {len(dataset.cases)} case(s) x {repeat} on [bold]{target.label}[/] ...")
                done = await run_dataset(
                    client, settings, pool, dataset, target, _new_run_id(), options, _progress(out), others
                )
                done.compared_to = runs[0].id if runs else None
                await save_run(pool, done)
                runs.append(done)
            return runs
        finally:
            await close_pools()

    runs = run(work)
    for done in runs:
        print_run(out, done)
    if len(runs) == 2:
        print_comparison(out, runs[0], runs[1])
    if junit is not None:
        junit.write_text(junit_xml(runs), encoding="utf-8")
        out.print(f"JUnit XML: {junit}")
    if as_json:
        body = {"runs": [run_json(r) for r in runs]}
        if len(runs) == 2:
            body["changes"] = [vars(c) | {"regressed": c.regressed} for c in changes(runs[0], runs[1])]
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
    gated = runs[-1]
    if gated.pass_rate < min_pass_rate:
        say(f"pass rate {gated.pass_rate:.0%} is below --min-pass-rate {min_pass_rate:.0%}")
        raise typer.Exit(EXIT_FAILED)


def _progress(out: Console) -> Callable[[CaseRun], None]:
    def said(done: CaseRun) -> None:
        verdict = "[green]pass[/]" if done.passed else "[red]FAIL[/]"
        out.print(f"  {verdict} {done.case_id} #{done.repeat} {done.status} {done.task_id}")

    return said


@eval_app.command("capture")
def capture_cmd(
    task_id: Annotated[str, typer.Argument(help="A finished task (workflow) id.")],
    out_file: Annotated[Path | None, typer.Option("--output", "-o", help="Write the case here.")] = None,
) -> None:
    """Turn a finished task into a case to edit: its request, context and checks from what it did."""

    async def work(settings: Settings, client: Client | None) -> str:
        assert client is not None
        try:
            return dump_case(await capture_case(client, settings.database_url, task_id), task_id)
        finally:
            await close_pools()

    text = run(work)
    if out_file is None:
        sys.stdout.write(text)
        return
    try:
        out_file.write_text(text, encoding="utf-8")
    except OSError as exc:
        say(f"{out_file}: cannot write the case ({exc.strerror})")
        raise typer.Exit(EXIT_UNAVAILABLE) from None
    make_console(stderr=True).print(f"Captured {task_id} as a case in {out_file}")
