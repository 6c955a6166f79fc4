"""`openloop agents …`: validate, apply, convert, list and show versioned agent definitions.

`validate` needs no database. The others use the Postgres that `openloop up` started (or
`OPENLOOP_DATABASE_URL`); without one they say so in one line and exit with code 2.
Exit codes: 0 ok, 1 a bad file or an unknown agent, 2 no usable database.
The database handling is in `surfaces.cli.agents_db`, the printed views in
`surfaces.cli.agent_views`.
"""

from __future__ import annotations

import getpass
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from activities.model_names import check_model_name
from activities.store.agents import (
    BindingConflict,
    StoredAgent,
    apply_agent,
    binding_conflicts,
    get_agent,
    list_agents,
    list_versions,
)
from activities.store.skills import SkillApplyError
from activities.tools.catalog import tool_permissions, unguarded_writes
from config.agent import AgentConfig
from config.loader import AgentConfigError, ConfigProblem, load_agent_documents
from surfaces.cli.agent_forms import convert, resolve_loaded
from surfaces.cli.agent_views import show_json, show_yaml, surfaces_summary
from surfaces.cli.agents_db import fail, with_database
from surfaces.cli.skills import agent_skills
from surfaces.cli.skills import apply_all as apply_skills

EXIT_INVALID = 1

agents_app = typer.Typer(
    help="Agent definitions: validate, apply, convert, list, show.", no_args_is_help=True
)
agents_app.command()(convert)

FilesOption = Annotated[
    list[Path],
    typer.Option("--file", "-f", help="Agent YAML file or folder of them; repeat for more."),
]


class OutputFormat(StrEnum):
    YAML = "yaml"
    JSON = "json"


def register(app: typer.Typer) -> None:
    app.add_typer(agents_app, name="agents")


def _out() -> Console:
    return Console(emoji=False, highlight=False)


def _expand(files: list[Path]) -> list[Path]:
    """Folders stand for the YAML files directly inside them, in name order."""
    paths: list[Path] = []
    for path in files:
        if path.is_dir():
            paths += sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
        else:
            paths.append(path)
    return paths


def _load_all(files: list[Path]) -> tuple[list[tuple[Path, list[AgentConfig]]], bool]:
    """Validate every file and print its result; returns the agents and whether all were good."""
    console = _out()
    loaded: list[tuple[Path, list[AgentConfig]]] = []
    seen: dict[tuple[str, str], Path] = {}
    all_good = True
    for path in _expand(files):
        # A model LiteLLM does not know: a bad provider is a problem, an unmapped model a warning.
        warnings: list[ConfigProblem] = []
        try:
            configs = load_agent_documents(
                path, tools=tool_permissions(), models=check_model_name, warnings=warnings
            )
        except AgentConfigError as exc:
            problems = exc.problems
            configs = []
        else:
            problems = [
                ConfigProblem(
                    str(path),
                    None,
                    "metadata.name",
                    f"agent {c.name!r} in workspace {c.workspace!r} is also defined in "
                    f"{seen[(c.workspace, c.name)]}; define each agent once",
                )
                for c in configs
                if (c.workspace, c.name) in seen
            ]
            for config in configs:
                seen.setdefault((config.workspace, config.name), path)
        if problems:
            all_good = False
            count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
            console.print(f"[red]✗[/red] {escape(str(path))}: {count}", soft_wrap=True)
            for problem in problems:
                console.print(f"  {escape(str(problem))}", soft_wrap=True)
            _print_warnings(console, warnings)
            continue
        names = ", ".join(f"{c.name} ({c.workspace})" for c in configs)
        console.print(f"[green]✓[/green] {escape(str(path))}: OK: {escape(names)}", soft_wrap=True)
        _print_warnings(console, warnings)
        for config in configs:
            for warning in unguarded_writes(config):
                console.print(
                    f"  [yellow]warning[/yellow] {escape(config.name)}: {escape(warning)}", soft_wrap=True
                )
        loaded.append((path, configs))
    return loaded, all_good


def _print_warnings(console: Console, warnings: list[ConfigProblem]) -> None:
    # In the file's order: a form's warnings and a model's are found at different times.
    for warning in sorted(warnings, key=lambda w: (w.document or 0, w.line or 0)):
        console.print(f"  [yellow]warning[/yellow] {escape(str(warning))}", soft_wrap=True)


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in some containers
        return ""


@agents_app.command()
def validate(files: FilesOption) -> None:
    """Check agent files without applying them: each file OK, or each problem with its line."""
    loaded, all_good = _load_all(files)
    _, names_good = resolve_loaded(loaded, required=False)
    skills = agent_skills(loaded, _out())
    if not (all_good and names_good and skills is not None):
        raise typer.Exit(EXIT_INVALID)


@agents_app.command()
def apply(files: FilesOption) -> None:
    """Validate every file, then store each agent as a new version (unchanged specs are kept)."""
    loaded, all_good = _load_all(files)
    if not all_good:
        raise fail("nothing applied: fix the problems above first", EXIT_INVALID)
    loaded, names_good = resolve_loaded(loaded, required=True)  # #channel, @handle -> Slack ids
    if not names_good:
        raise fail("nothing applied: fix the Slack names above first", EXIT_INVALID)
    configs = [config for _, in_file in loaded for config in in_file]
    clashes = [p for i, c in enumerate(configs) for p in binding_conflicts(c, configs[:i])]
    if clashes:
        raise fail("nothing applied: " + "; ".join(clashes), EXIT_INVALID)
    skills = agent_skills(loaded, _out())
    if skills is None:
        raise fail("nothing applied: fix the skills above first", EXIT_INVALID)
    applied_by = _who()

    async def work(pool: AsyncConnectionPool) -> list[tuple[StoredAgent, bool]]:
        # Check the bindings the command leaves behind before applying anything.
        after = {(a.workspace, a.name): a.config for a in await list_agents(pool)}
        after.update({(c.workspace, c.name): c for c in configs})
        problems = [p for c in configs for p in binding_conflicts(c, list(after.values()))]
        if problems:
            raise BindingConflict("; ".join(dict.fromkeys(problems)))
        await apply_skills(pool, skills, applied_by)  # before the agents that name them
        return [
            await apply_agent(pool, config, source=str(path), applied_by=applied_by)
            for path, configs in loaded
            for config in configs
        ]

    console = _out()
    try:
        results = with_database(work, migrate=True)
    except (BindingConflict, SkillApplyError) as exc:
        raise fail(f"nothing applied: {exc}", EXIT_INVALID) from exc
    for stored, created in results:
        outcome = "[green]applied[/green]" if created else "[dim]unchanged[/dim]"
        console.print(
            f"{escape(stored.name)}  workspace {escape(stored.workspace)}  "
            f"version {stored.version}  {outcome}",
            soft_wrap=True,
        )


@agents_app.command("list")
def list_command() -> None:
    """Every agent's latest version."""
    agents = with_database(list_agents)
    console = _out()
    if not agents:
        console.print("No agents applied yet: run `openloop agents apply -f FILE`.")
        return
    table = Table("name", "workspace", "version", "applied at", "default model", "surfaces")
    for agent in agents:
        table.add_row(
            escape(agent.name),
            escape(agent.workspace),
            str(agent.version),
            agent.applied_at.strftime("%Y-%m-%d %H:%M:%S %Z").strip(),
            escape(agent.config.spec.model_policy.default),
            escape(surfaces_summary(agent.config)),
        )
    console.print(table)


@agents_app.command()
def show(
    name: Annotated[str, typer.Argument(help="Agent name (metadata.name).")],
    version: Annotated[int | None, typer.Option("--version", help="A past version.")] = None,
    workspace: Annotated[
        str | None, typer.Option("--workspace", "-w", help="When two workspaces share the name.")
    ] = None,
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.YAML,
) -> None:
    """The stored spec of an agent (latest, or `--version N`) and its memory embedding model."""

    async def work(pool: AsyncConnectionPool) -> tuple[StoredAgent | None, list[int]]:
        agent = await get_agent(pool, name, workspace=workspace, version=version)
        versions = [] if agent else [v.version for v in await list_versions(pool, name)]
        return agent, versions

    agent, versions = with_database(work)
    if agent is None:
        if versions and version is not None:
            known = ", ".join(str(v) for v in versions)
            raise fail(f"agent {name!r} has no version {version}; versions: {known}", EXIT_INVALID)
        raise fail(
            f"no agent named {name!r}: see `openloop agents list`, or apply one with "
            "`openloop agents apply -f FILE`",
            EXIT_INVALID,
        )
    text = show_json(agent) if output is OutputFormat.JSON else show_yaml(agent)
    console = _out()
    if console.is_terminal:
        console.print(Syntax(text, output.value, word_wrap=True))
    else:
        typer.echo(text.rstrip("\n"))
