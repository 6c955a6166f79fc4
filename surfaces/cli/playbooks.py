"""`openloop playbooks compile|init`: playbook files checked and shown as DAGs, nothing run.

`compile` reads `./playbooks` (or `--dir`, or the folder given: a Loopy project reads as
written, `config.playbooks.project`); without one it compiles the examples shipped in
`config/playbook_examples/` and says so, and `init` copies them into a folder to start from.
Agents are checked against agent files (`--agents`, else `./agents/`, else the shipped
example agents for the shipped examples) or the agents applied on the stack (`--applied`);
what their tools write comes from the tool catalog and their MCP servers' `writes`. The
`playbooks` group is `playbooks_app`: other modules add commands to it (`apply`, `runs`, ...).
Exit codes: 0 compiled (warnings allowed), 1 errors, 2 no usable database for `--applied`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from activities.store.agents import latest_agents
from activities.tools.catalog import tool_permissions, writes_of
from config.agent import AgentConfig
from config.loader import EXAMPLES_DIR as EXAMPLE_AGENTS
from config.loader import load_agent_documents
from config.playbooks import AgentWrites, CompileReport, compile_playbooks
from config.playbooks.typed_fields import type_text
from config.problems import AgentConfigError, ConfigProblem
from surfaces.cli.memory import run_with_pool
from workflows.playbook_types import CompiledPlaybook, TriggerKind

__all__ = [
    "EXAMPLES",
    "agent_facts",
    "applied_agents",
    "compile_folder",
    "playbooks_app",
    "print_report",
    "register",
]

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "playbook_examples"
DEFAULT_DIR = Path("playbooks")
EXIT_ERRORS = 1

playbooks_app = typer.Typer(
    help="Playbooks: event- and cron-triggered multi-step automations kept as files.", no_args_is_help=True
)
console = Console(emoji=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(playbooks_app, name="playbooks")


def agent_facts(configs: Iterable[AgentConfig]) -> dict[str, AgentWrites]:
    """Each agent's writing tools (its MCP servers' `writes` too) and the ones an approval
    covers, from the tool catalog."""
    return {config.name: writes_of(config) for config in configs}


def _agent_files(paths: list[Path]) -> tuple[list[AgentConfig], list[ConfigProblem]]:
    configs: list[AgentConfig] = []
    problems: list[ConfigProblem] = []
    for path in paths:
        files = (
            sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml")) if path.is_dir() else [path]
        )
        for file in files:
            try:
                configs += load_agent_documents(file, tools=tool_permissions())
            except AgentConfigError as exc:
                problems += exc.problems
    return configs, problems


def applied_agents() -> list[AgentConfig]:
    """The latest version of every agent applied on the stack (its database)."""

    async def work(pool: AsyncConnectionPool) -> list[AgentConfig]:
        return [stored.config for stored in await latest_agents(pool)]

    return run_with_pool(work)


def compile_folder(folder: Path, configs: list[AgentConfig] | None) -> CompileReport:
    """`folder` compiled against `configs` (None: agents unknown, their checks skipped)."""
    if configs is None:
        return compile_playbooks(folder)
    return compile_playbooks(folder, {c.name for c in configs}, agents=agent_facts(configs))


def _trigger_text(playbook: CompiledPlaybook, report: CompileReport) -> str:
    trigger = playbook.trigger
    if trigger.kind is TriggerKind.CRON:
        return f'cron("{trigger.cron}", tz="{trigger.timezone}")'
    event = report.events.get(trigger.event or "")
    origin = f" ({event.source})" if event is not None and event.source else ""
    return f"{trigger.event}{origin}"


def _dag(playbook: CompiledPlaybook, report: CompileReport) -> Tree:
    """The playbook and its steps in running order, each with what it runs after."""
    title = f"[bold]{escape(playbook.name)}[/bold]  on {escape(_trigger_text(playbook, report))}"
    tree = Tree(f"{title}  [dim]sha256 {playbook.content_hash[:12]}[/dim]")
    for step in playbook.steps:
        parts = [f"after {', '.join(step.after)}" if step.after else "entry", f"agent {step.agent}"]
        if step.budget_usd is not None:
            parts.append(f"${step.budget_usd:.2f}")
        parts.append(f"approval {step.approval}")
        if step.emits:
            when = f" when {step.emit_when}" if step.emit_when is not None else ""
            parts.append(f"emits {step.emits}{when}")
        node = tree.add(f"[bold]{escape(step.name)}[/bold]  {escape(' · '.join(parts))}")
        if step.output:
            node.add(escape("output: " + ", ".join(f"{f.name}: {type_text(f)}" for f in step.output)))
    return tree


def print_report(report: CompileReport, out: Console = console) -> None:
    """Each compiled playbook as a tree of its steps, then every error and warning."""
    for playbook in report.playbooks:
        out.print(_dag(playbook, report), soft_wrap=False)
        out.print()
    for problem in report.errors:
        out.print(f"[red]✗[/red] {escape(str(problem))}")
    for problem in report.warnings:
        out.print(f"[yellow]![/yellow] {escape(str(problem))}")
    count = len(report.playbooks)
    summary = (
        f"{count} playbook{'s' if count != 1 else ''} compiled, {len(report.errors)} error(s), "
        f"{len(report.warnings)} warning(s)"
    )
    out.print(f"[{'green' if report.ok else 'red'}]{summary}[/]")


def _folder(folder: Path | None) -> Path:
    if folder is not None:
        return folder
    if DEFAULT_DIR.is_dir():
        return DEFAULT_DIR
    console.print(
        f"no ./{DEFAULT_DIR} folder here: compiling the shipped examples in {escape(str(EXAMPLES))} "
        f"(copy them with `openloop playbooks init`, or pass --dir)"
    )
    return EXAMPLES


@playbooks_app.command("compile")
def compile_command(
    path: Annotated[Path | None, typer.Argument(help="The folder, as --dir (a Loopy project too)")] = None,
    folder: Annotated[
        Path | None,
        typer.Option("--dir", help="The playbooks folder (default ./playbooks, else the examples)"),
    ] = None,
    agents: Annotated[
        list[Path] | None, typer.Option("--agents", help="Agent files or folders to check agents against")
    ] = None,
    applied: Annotated[
        bool, typer.Option("--applied", help="Check against the agents applied on the stack")
    ] = False,
) -> None:
    """Build and check every playbook's DAG without running anything; exit 1 on any error."""
    root = _folder(folder or path)
    configs: list[AgentConfig] | None = None
    if applied:
        configs = applied_agents()
    else:
        paths = agents or ([Path("agents")] if Path("agents").is_dir() else [])
        if not paths and root.resolve() == EXAMPLES:
            paths = [EXAMPLE_AGENTS]
        if paths:
            configs, problems = _agent_files(paths)
            for problem in problems:
                console.print(f"[red]✗[/red] {escape(str(problem))}")
            if problems:
                console.print("[red]fix the agent files above first[/red]")
                raise typer.Exit(EXIT_ERRORS)
            names = ", ".join(c.name for c in configs)
            console.print(f"agents from {escape(', '.join(str(p) for p in paths))}: {names}")
    report = compile_folder(root, configs)
    print_report(report)
    if not report.ok:
        raise typer.Exit(EXIT_ERRORS)


@playbooks_app.command()
def init(
    folder: Annotated[Path, typer.Argument(help="Where to write the example playbooks")] = DEFAULT_DIR,
) -> None:
    """Copy the example playbooks (a nightly scan, a CI triage chain) into a folder to start from."""
    if folder.exists():
        console.print(
            f"[red]{escape(str(folder))} already exists: choose another folder or move it away[/red]"
        )
        raise typer.Exit(EXIT_ERRORS)
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wrote = ", ".join(sorted(p.name for p in folder.iterdir()))
    console.print(f"[green]✓[/green] wrote {escape(str(folder))}/: {escape(wrote)}")
    console.print(f"next: openloop playbooks compile --dir {escape(str(folder))}")
