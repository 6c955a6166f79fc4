"""The database behind `openloop agents …`: reach it fast, or fail with one line.

`with_database` runs one piece of work on a pool of the configured Postgres and turns every
way of not having a usable database into exit code 2 and a sentence saying what to do.
`fail` is the commands' one way to print an error and exit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg
import typer
from psycopg_pool import AsyncConnectionPool

from activities.store.db import apply_migrations_async, get_pool
from config.settings import Settings
from surfaces.cli.errors import say

T = TypeVar("T")

EXIT_NO_DATABASE = 2
CONNECT_TIMEOUT_S = 5  # a wrong address should fail fast, not hang the terminal


class _DatabaseUnavailable(Exception):
    """No usable database; the message says what to do."""


def fail(message: str, code: int) -> typer.Exit:
    """Print `message` as an error on stderr; the caller raises the returned `Exit`."""
    say(message)
    return typer.Exit(code)


def _database_url() -> str:
    settings = Settings.from_env()
    if not settings.database_url:
        raise fail(
            "no database configured: run `openloop up` to start the embedded stack, "
            "or set OPENLOOP_DATABASE_URL",
            EXIT_NO_DATABASE,
        )
    return settings.database_url


def require_database() -> None:
    """Fail in one line before any work when no database is configured."""
    _database_url()


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


def with_database(work: Callable[[AsyncConnectionPool], Awaitable[T]], migrate: bool = False) -> T:
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
        raise fail(str(exc), EXIT_NO_DATABASE) from None
    except psycopg.errors.UndefinedTable:
        raise fail(
            "the database has no OpenLoop tables yet: run `openloop up`, or "
            "`openloop agents apply -f FILE` (which creates them)",
            EXIT_NO_DATABASE,
        ) from None
    except psycopg.Error as exc:
        reason = _first_line(exc)
        raise fail(f"database error: {reason}", EXIT_NO_DATABASE) from None
