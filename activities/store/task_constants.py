"""A task's constants (`TaskConstants`): written once per run, read by every model call.

The model activity reads the row inside the pipelined round trip it makes anyway (with the
check for a previous attempt's answer), so the row costs no extra round trip. Nothing is
cached between calls: the row is read for each call, so a new run's row is never missed.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from psycopg import AsyncConnection, AsyncCursor
from psycopg_pool import AsyncConnectionPool
from pydantic import TypeAdapter

from workflows.task_constants import TaskConstants

_DECODE = TypeAdapter(TaskConstants)


async def save(pool: AsyncConnectionPool, task_id: str, constants: TaskConstants) -> None:
    """Store (or replace, for a new run) the task's constants."""
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO task_constants (task_id, constants) VALUES (%s, %s)"
            " ON CONFLICT (task_id) DO UPDATE SET constants = EXCLUDED.constants, updated_at = now()",
            (task_id, json.dumps(asdict(constants))),
        )


async def request(conn: AsyncConnection[Any], task_id: str) -> AsyncCursor[Any]:
    """Send the read; in a pipeline it travels with the statements around it (`received`)."""
    return await conn.execute("SELECT constants FROM task_constants WHERE task_id = %s", (task_id,))


async def received(cursor: AsyncCursor[Any]) -> TaskConstants | None:
    row = await cursor.fetchone()
    return None if row is None else _DECODE.validate_python(row["constants"])


async def load(pool: AsyncConnectionPool, task_id: str) -> TaskConstants | None:
    async with pool.connection() as conn:
        return await received(await request(conn, task_id))
