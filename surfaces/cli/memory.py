"""`openloop memory list|search|forget`: look at what agents remember, and delete a memory.

`search` runs the same scoped recall a task runs (it needs the agent's stored spec for the
scope and embedding model); `forget` deletes one row and writes an audit row naming who
did it. Exit codes: 0 ok, 1 unknown agent or memory, 2 no usable database.
"""

from __future__ import annotations

import asyncio
import getpass
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Annotated, Any, TypeVar

import psycopg
import typer
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from activities.store.agents import get_agent
from activities.store.memory import forget, list_memories, search
from config.settings import Settings
from surfaces.cli.errors import require_database, say
from workflows.types import MemoryScopeRef

T = TypeVar("T")
EXIT_NOT_FOUND = 1
EXIT_NO_DATABASE = 2
CONNECT_TIMEOUT_S = 5

memory_app = typer.Typer(help="Agent memory: list, search, forget.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")


def fail(message: str, code: int) -> typer.Exit:
    say(message)
    return typer.Exit(code)


def run_with_pool(work: Callable[[AsyncConnectionPool], Awaitable[T]]) -> T:
    """Run `work` with a small pool of its own (one command, one event loop, then closed)."""
    url = Settings.from_env().database_url
    if not url:
        raise fail(
            "no database configured: run `openloop up`, or set OPENLOOP_DATABASE_URL",
            EXIT_NO_DATABASE,
        )

    require_database(url)  # down: one line at once, not after the pool's wait

    async def main() -> T:
        async with AsyncConnectionPool(
            url,
            min_size=1,
            max_size=2,
            kwargs={"autocommit": True, "row_factory": dict_row},
            open=False,
        ) as pool:
            await pool.wait(timeout=CONNECT_TIMEOUT_S)
            return await work(pool)

    try:
        return asyncio.run(main())
    except psycopg.errors.UndefinedTable:
        raise fail("the database has no OpenLoop tables yet: run `openloop up`", EXIT_NO_DATABASE) from None
    except (psycopg.Error, TimeoutError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise fail(f"database error: {first}", EXIT_NO_DATABASE) from None


def who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in some containers
        return "operator"


@memory_app.command("list")
def list_command(
    agent: Annotated[str | None, typer.Option(help="Only this agent's memories.")] = None,
    workspace: Annotated[str | None, typer.Option(help="Only this workspace.")] = None,
    scope: Annotated[str | None, typer.Option(help="channel, agent or workspace.")] = None,
    key: Annotated[str | None, typer.Option(help="Scope key, e.g. slack:C0123ABCD.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.")] = 50,
    expired: Annotated[bool, typer.Option("--expired", help="Include expired rows.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")] = False,
) -> None:
    """List memories, newest first."""
    rows = run_with_pool(
        lambda pool: list_memories(
            pool,
            workspace=workspace,
            agent=agent,
            scope=scope,
            scope_key=key,
            limit=limit,
            include_expired=expired,
        )
    )
    console = Console(emoji=False, highlight=False)
    if as_json:
        for row in rows:
            print(json.dumps(asdict(row), default=str))
        return
    if not rows:
        console.print("No memories match.")
        return
    table = Table("id", "agent", "scope", "key", "content", "source", "created", "expires")
    for row in rows:
        table.add_row(
            row.id,
            f"{row.workspace}/{row.agent}",
            row.scope,
            escape(row.scope_key),
            escape(_short(row.content, 80)),
            escape(f"{row.source_task_id}#{row.source_step}"),
            f"{row.created_at:%Y-%m-%d %H:%M}",
            f"{row.expires_at:%Y-%m-%d}",
        )
    console.print(table)


@memory_app.command("search")
def search_command(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    agent: Annotated[str, typer.Option(help="The agent whose memory to search.")],
    key: Annotated[
        str | None,
        typer.Option(help="Scope key for channel scope, e.g. slack:C0123ABCD (surface:channel)."),
    ] = None,
    workspace: Annotated[str | None, typer.Option(help="The agent's workspace.")] = None,
    k: Annotated[int, typer.Option("-k", help="How many results.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table.")] = False,
) -> None:
    """Search one agent's memory exactly as its tasks recall it (same scope, same model)."""

    async def work(pool: AsyncConnectionPool) -> tuple[MemoryScopeRef, list[Any]] | None:
        stored = await get_agent(pool, agent, workspace=workspace)
        if stored is None:
            return None
        memory = stored.config.spec.memory
        scope_key = {"agent": stored.name, "workspace": stored.workspace}.get(memory.scope.value)
        if scope_key is None and not key:
            raise fail(
                f"agent {agent!r} keeps channel memory: pass --key surface:channel "
                "(see `openloop memory list --agent` for the keys)",
                EXIT_NOT_FOUND,
            )
        ref = MemoryScopeRef(
            workspace=stored.workspace,
            agent=stored.name,
            scope=memory.scope.value,
            scope_key=scope_key or key or "",
            embedding=memory.embedding,
            retention_days=memory.retention_days,
        )
        return ref, await search(pool, ref, query, k)

    found = run_with_pool(work)
    if found is None:
        raise fail(f"no agent named {agent!r}: see `openloop agents list`", EXIT_NOT_FOUND)
    ref, items = found
    if as_json:
        print(json.dumps({"scope": asdict(ref), "items": [asdict(i) for i in items]}))
        return
    console = Console(emoji=False, highlight=False)
    if not items:
        console.print(f"No memories in {ref.scope} {escape(ref.scope_key)}.")
        return
    table = Table("score", "id", "created", "content", title=f"{ref.scope} {ref.scope_key}")
    for item in items:
        table.add_row(f"{item.score:.3f}", item.id, item.created_at_iso[:16], escape(item.content))
    console.print(table)


@memory_app.command("forget")
def forget_command(
    memory_id: Annotated[str, typer.Argument(help="The memory's id (from `memory list`).")],
    by: Annotated[str | None, typer.Option(help="Who asks; default: your login.")] = None,
    reason: Annotated[str, typer.Option(help="Why, for the audit trail.")] = "",
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask to confirm.")] = False,
) -> None:
    """Delete one memory. The deletion is written to the audit trail."""
    if not yes:
        typer.confirm(f"Delete memory {memory_id}?", abort=True)
    actor = by or who()
    gone = run_with_pool(lambda pool: forget(pool, memory_id, actor, reason))
    if gone is None:
        raise fail(f"no memory with id {memory_id!r}", EXIT_NOT_FOUND)
    Console(emoji=False, highlight=False).print(
        f"Forgot memory {gone.id} ({gone.scope} {escape(gone.scope_key)}): "
        f"{escape(_short(gone.content, 80))} — audited as {escape(actor)}"
    )


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
