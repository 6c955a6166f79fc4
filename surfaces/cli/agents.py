"""`openloop agents …`: validate, apply, list and show versioned agent definitions.

`validate` needs no database. The others use the Postgres that `openloop up` started (or
`OPENLOOP_DATABASE_URL`); without one they say so in one line and exit with code 2.
Exit codes: 0 ok, 1 a bad file or an unknown agent, 2 no usable database.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
from collections.abc import Awaitable, Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import psycopg
import typer
import yaml
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from activities.store.agents import (
    BindingConflict,
    StoredAgent,
    apply_agent,
    binding_conflicts,
    get_agent,
    list_agents,
    list_versions,
)
from activities.store.db import apply_migrations_async, get_pool
from config.agent import AgentConfig
from config.loader import AgentConfigError, ConfigProblem, load_agent_documents
from config.settings import Settings

T = TypeVar("T")

EXIT_INVALID = 1
EXIT_NO_DATABASE = 2
CONNECT_TIMEOUT_S = 5  # a wrong address should fail fast, not hang the terminal

# The key each embedding provider needs, to say which one is missing.
_PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY",
    "azure": "AZURE_API_KEY",
    "cohere": "COHERE_API_KEY",
    "voyage": "VOYAGE_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "gemini": "GEMINI_API_KEY",
}

agents_app = typer.Typer(help="Agent definitions: validate, apply, list, show.", no_args_is_help=True)

FilesOption = Annotated[
    list[Path],
    typer.Option("--file", "-f", help="Agent YAML file or folder of them; repeat for more."),
]


class OutputFormat(StrEnum):
    YAML = "yaml"
    JSON = "json"


class _DatabaseUnavailable(Exception):
    """No usable database; the message says what to do."""


def register(app: typer.Typer) -> None:
    app.add_typer(agents_app, name="agents")


def _out() -> Console:
    return Console(highlight=False)


def _fail(message: str, code: int) -> typer.Exit:
    console = Console(stderr=True, highlight=False)
    console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


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
        try:
            configs = load_agent_documents(path)
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
            continue
        names = ", ".join(f"{c.name} ({c.workspace})" for c in configs)
        console.print(f"[green]✓[/green] {escape(str(path))}: OK: {escape(names)}", soft_wrap=True)
        loaded.append((path, configs))
    return loaded, all_good


def _database_url() -> str:
    settings = Settings.from_env()
    if not settings.database_url:
        raise _fail(
            "no database configured: run `openloop up` to start the embedded stack, "
            "or set OPENLOOP_DATABASE_URL",
            EXIT_NO_DATABASE,
        )
    return settings.database_url


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


async def _probe(url: str) -> None:
    """Connect once with a short timeout: the pool would wait 30 s before giving up."""
    try:
        probe = await psycopg.AsyncConnection.connect(url, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        reason = _first_line(exc)
        raise _DatabaseUnavailable(
            f"cannot reach the database ({reason}): run `openloop up` to start the embedded "
            "stack, or set OPENLOOP_DATABASE_URL to a reachable PostgreSQL"
        ) from None
    await probe.close()


def _with_database(work: Callable[[AsyncConnectionPool], Awaitable[T]], migrate: bool = False) -> T:
    url = _database_url()

    async def main() -> T:
        await _probe(url)
        if migrate:
            await apply_migrations_async(url)  # idempotent; a fresh database gets its tables
        pool = await get_pool(url)
        try:
            return await work(pool)
        finally:
            await pool.close()  # the pool belongs to this event loop; get_pool reopens later

    try:
        return asyncio.run(main())
    except _DatabaseUnavailable as exc:
        raise _fail(str(exc), EXIT_NO_DATABASE) from None
    except psycopg.errors.UndefinedTable:
        raise _fail(
            "the database has no OpenLoop tables yet: run `openloop up`, or "
            "`openloop agents apply -f FILE` (which creates them)",
            EXIT_NO_DATABASE,
        ) from None
    except psycopg.Error as exc:
        reason = _first_line(exc)
        raise _fail(f"database error: {reason}", EXIT_NO_DATABASE) from None


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in some containers
        return ""


def embedding_description(model: str) -> str:
    """Which embedding model memory uses, and whether it needs a key."""
    if model.startswith("offline/"):
        return f"{model} (offline, no key needed)"
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    key = _PROVIDER_KEYS.get(provider)
    if key is None:
        return f"{model} (provider {provider}; needs that provider's API key)"
    state = "set" if os.environ.get(key) else "not set"
    return f"{model} (provider {provider}; needs {key}, which is {state})"


def _surfaces(config: AgentConfig) -> str:
    surfaces = config.spec.surfaces
    parts = []
    if surfaces.slack is not None:
        parts.append("slack: " + ", ".join(surfaces.slack.channels))
    if surfaces.github is not None:
        parts.append("github: " + ", ".join(surfaces.github.repos))
    if surfaces.cli.main:
        parts.append("cli")
    return "; ".join(parts) or "none"


@agents_app.command()
def validate(files: FilesOption) -> None:
    """Check agent files without applying them: each file OK, or each problem with its line."""
    _, all_good = _load_all(files)
    if not all_good:
        raise typer.Exit(EXIT_INVALID)


@agents_app.command()
def apply(files: FilesOption) -> None:
    """Validate every file, then store each agent as a new version (unchanged specs are kept)."""
    loaded, all_good = _load_all(files)
    if not all_good:
        raise _fail("nothing applied: fix the problems above first", EXIT_INVALID)
    configs = [config for _, in_file in loaded for config in in_file]
    clashes = [p for i, c in enumerate(configs) for p in binding_conflicts(c, configs[:i])]
    if clashes:
        raise _fail("nothing applied: " + "; ".join(clashes), EXIT_INVALID)
    applied_by = _who()

    async def work(pool: AsyncConnectionPool) -> list[tuple[StoredAgent, bool]]:
        # Check the bindings the command leaves behind before applying anything.
        after = {(a.workspace, a.name): a.config for a in await list_agents(pool)}
        after.update({(c.workspace, c.name): c for c in configs})
        problems = [p for c in configs for p in binding_conflicts(c, list(after.values()))]
        if problems:
            raise BindingConflict("; ".join(dict.fromkeys(problems)))
        return [
            await apply_agent(pool, config, source=str(path), applied_by=applied_by)
            for path, configs in loaded
            for config in configs
        ]

    console = _out()
    try:
        results = _with_database(work, migrate=True)
    except BindingConflict as exc:
        raise _fail(f"nothing applied: {exc}", EXIT_INVALID) from exc
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
    agents = _with_database(list_agents)
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
            escape(_surfaces(agent.config)),
        )
    console.print(table)


class _BlockStyleDumper(yaml.SafeDumper):
    """Multi-line text (instructions) as `|` blocks, as a person would write it."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BlockStyleDumper.add_representer(str, _represent_str)


def _show_json(agent: StoredAgent) -> str:
    document: dict[str, Any] = {
        "name": agent.name,
        "workspace": agent.workspace,
        "version": agent.version,
        "applied_at": agent.applied_at.isoformat(),
        "applied_by": agent.applied_by,
        "source": agent.source,
        "spec_sha256": agent.spec_sha256,
        "memory_embedding": embedding_description(agent.config.spec.memory.embedding),
        "config": agent.config.model_dump(mode="json"),
    }
    return json.dumps(document, indent=2)


def _show_yaml(agent: StoredAgent) -> str:
    # The header is YAML comments, so the output can be saved and applied again as it is.
    memory = agent.config.spec.memory
    header = [
        f"# {agent.name} in workspace {agent.workspace}: version {agent.version}, applied "
        f"{agent.applied_at.isoformat(timespec='seconds')}"
        + (f" by {agent.applied_by}" if agent.applied_by else "")
        + (f" from {agent.source}" if agent.source else ""),
        f"# memory embedding: {embedding_description(memory.embedding)}",
        f"# memory: scope {memory.scope.value}, kept {memory.retention_days} days",
    ]
    body = yaml.dump(
        agent.config.model_dump(mode="json"),
        Dumper=_BlockStyleDumper,
        sort_keys=False,
        allow_unicode=True,
    )
    return "\n".join(header) + "\n" + body


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

    agent, versions = _with_database(work)
    if agent is None:
        if versions and version is not None:
            known = ", ".join(str(v) for v in versions)
            raise _fail(f"agent {name!r} has no version {version}; versions: {known}", EXIT_INVALID)
        raise _fail(
            f"no agent named {name!r}: see `openloop agents list`, or apply one with "
            "`openloop agents apply -f FILE`",
            EXIT_INVALID,
        )
    text = _show_json(agent) if output is OutputFormat.JSON else _show_yaml(agent)
    console = _out()
    if console.is_terminal:
        console.print(Syntax(text, output.value, word_wrap=True))
    else:
        typer.echo(text.rstrip("\n"))
