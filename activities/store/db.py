"""PostgreSQL access: one async connection pool per process, and the migration runner.

Migrations are plain ordered SQL files in `activities/store/migrations/`, each applied once and
recorded in `schema_migrations`. An advisory lock makes concurrent runs (two workers
starting together) safe: the second waits, then finds nothing left to do.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_MIGRATION_LOCK_ID = 7_215_004_211  # arbitrary, fixed: the advisory lock for migrations

# A pool belongs to the event loop that opened it: a process that runs more than one loop
# (each CLI command's `asyncio.run`, tests) gets one pool per loop, never another loop's.
_pools: dict[tuple[str, bool, asyncio.AbstractEventLoop], AsyncConnectionPool] = {}
_pools_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}


async def get_pool(database_url: str, *, checked: bool = True) -> AsyncConnectionPool:
    """The process-wide pool for `database_url` on this event loop, opened on first use.

    A checked pool replaces a connection that died with the server (a restart, a failover)
    when it is taken, not when the write that needed it fails: activities whose retry would
    repeat paid work rely on that. The check is a round trip per use, so a hot path that can
    simply retry its one statement (the Slack ack) takes an unchecked pool.
    """
    loop = asyncio.get_running_loop()
    key = (database_url, checked, loop)
    pool = _pools.get(key)
    if pool is not None and not pool.closed:
        return pool
    async with _pools_locks.setdefault(loop, asyncio.Lock()):
        _forget_closed_loops()
        pool = _pools.get(key)
        if pool is None or pool.closed:
            pool = AsyncConnectionPool(
                database_url,
                min_size=1,
                max_size=10,
                kwargs={"autocommit": True, "row_factory": dict_row},
                check=AsyncConnectionPool.check_connection if checked else None,
                open=False,
            )
            await pool.open(wait=True, timeout=30)
            _pools[key] = pool
        return pool


def _forget_closed_loops() -> None:
    """Drop the pools and locks of loops that have ended: nothing can use or close them now."""
    for key in [k for k in _pools if k[2].is_closed()]:
        del _pools[key]
    for loop in [loop for loop in _pools_locks if loop.is_closed()]:
        del _pools_locks[loop]


async def close_pools() -> None:
    """Close this loop's pools."""
    loop = asyncio.get_running_loop()
    async with _pools_locks.setdefault(loop, asyncio.Lock()):
        for key in [k for k in _pools if k[2] is loop]:
            await _pools.pop(key).close()


def migration_files() -> list[Path]:
    return sorted(MIGRATIONS_DIR.glob("*.sql"))


def apply_migrations(database_url: str) -> list[str]:
    """Apply pending migrations in order; return the names applied now."""
    applied_now: list[str] = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_ID,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
            for path in migration_files():
                if path.name in done:
                    continue
                conn.execute(path.read_text())  # type: ignore[call-overload]
                conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (path.name,))
                applied_now.append(path.name)
    return applied_now


async def apply_migrations_async(database_url: str) -> list[str]:
    return await asyncio.to_thread(apply_migrations, database_url)


async def pending_migrations(database_url: str) -> list[str]:
    """Migrations this code ships that the database has not recorded as applied."""
    names = [path.name for path in migration_files()]
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, connect_timeout=10
    ) as conn:
        cursor = await conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
        row = await cursor.fetchone()
        if not row or not row[0]:
            return names
        cursor = await conn.execute("SELECT name FROM schema_migrations")
        done = {name for (name,) in await cursor.fetchall()}
    return [name for name in names if name not in done]
