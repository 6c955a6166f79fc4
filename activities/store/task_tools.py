"""The MCP tool specs a task started with, and the recorded results of its MCP calls.

Specs are written once by the listing activity and read by the model activity, so a model
call offers the model the very schemas the workflow checks arguments against. A call's
result is recorded under its idempotency key before the activity returns.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from workflows.tool_catalog import ToolRuns, ToolSpec, WriteBound
from workflows.types import ToolCallResult


async def save_specs(pool: AsyncConnectionPool, task_id: str, specs: list[ToolSpec]) -> None:
    async with pool.connection() as conn:
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO task_tools (task_id, name, spec) VALUES (%s, %s, %s)"
                " ON CONFLICT (task_id, name) DO NOTHING",
                [(task_id, spec.name, json.dumps(asdict(spec))) for spec in specs],
            )


async def load_specs(pool: AsyncConnectionPool, task_id: str, names: list[str]) -> dict[str, ToolSpec]:
    if not names:
        return {}
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "SELECT name, spec FROM task_tools WHERE task_id = %s AND name = ANY(%s)", (task_id, names)
        )
        return {row["name"]: _spec(row["spec"]) for row in await cur.fetchall()}


def _spec(data: dict[str, Any]) -> ToolSpec:
    return ToolSpec(
        **{
            **data,
            "runs": ToolRuns(data["runs"]),
            "bound_by": WriteBound(data["bound_by"]) if data.get("bound_by") else None,
        }
    )


async def recorded_result(pool: AsyncConnectionPool, key: str) -> ToolCallResult | None:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "SELECT ok, output, output_ref, error_kind FROM mcp_call_results WHERE idempotency_key = %s",
            (key,),
        )
        row = await cur.fetchone()
    return None if row is None else ToolCallResult(**row)


async def record_result(pool: AsyncConnectionPool, key: str, task_id: str, result: ToolCallResult) -> None:
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO mcp_call_results (idempotency_key, task_id, ok, output, output_ref, error_kind)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (idempotency_key) DO NOTHING",
            (key, task_id, result.ok, result.output, result.output_ref, result.error_kind),
        )
