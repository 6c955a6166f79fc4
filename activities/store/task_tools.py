"""The MCP tool specs a task started with, and the recorded results of its MCP calls.

Specs are written once by the listing activity and read by the model activity, so a model
call offers the model the very schemas the workflow checks arguments against. A call's
result is recorded under its idempotency key before the activity returns.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from workflows.tool_catalog import ToolRuns, ToolSpec, WriteBound
from workflows.types import ToolCallResult

# Sets this process has stored: a task whose servers listed what an earlier task's did writes
# only its pointer. Bounded; forgetting one costs a no-op insert.
_STORED_SETS: dict[tuple[int, str], None] = {}
_REMEMBERED_SETS = 1024
_DOCUMENTS: dict[tuple[int, ...], tuple[tuple[ToolSpec, ...], str, str]] = {}
_REMEMBERED_DOCUMENTS = 64
_POINT = "INSERT INTO task_tool_sets (task_id, sha256) VALUES (%s, %s) ON CONFLICT DO NOTHING"


async def save_specs(pool: AsyncConnectionPool, task_id: str, specs: list[ToolSpec]) -> None:
    if not specs:
        return
    document, digest = _document(specs)
    known = (id(pool), digest)
    async with pool.connection() as conn:
        if known not in _STORED_SETS:
            await _store_set(conn, digest, document)
        try:
            async with conn.transaction():
                await conn.execute(_POINT, (task_id, digest))
        except psycopg.errors.ForeignKeyViolation:  # a set remembered from a database since reset
            await _store_set(conn, digest, document)
            await conn.execute(_POINT, (task_id, digest))
    _STORED_SETS[known] = None
    if len(_STORED_SETS) > _REMEMBERED_SETS:
        del _STORED_SETS[next(iter(_STORED_SETS))]


async def _store_set(conn: psycopg.AsyncConnection[Any], digest: str, document: str) -> None:
    await conn.execute(
        "INSERT INTO tool_spec_sets (sha256, specs) VALUES (%s, %s::jsonb) ON CONFLICT DO NOTHING",
        (digest, document),
    )


async def load_specs(pool: AsyncConnectionPool, task_id: str, names: list[str]) -> dict[str, ToolSpec]:
    """The named specs the task listed; the first set it saved wins a name listed twice, like
    the first listing did before sets were shared."""
    if not names:
        return {}
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "SELECT listed.key AS name, listed.value AS spec, t.created_at FROM task_tool_sets t"
            " JOIN tool_spec_sets s ON s.sha256 = t.sha256, jsonb_each(s.specs) AS listed"
            " WHERE t.task_id = %s AND listed.key = ANY(%s)"
            " UNION ALL SELECT name, spec, created_at FROM task_tools WHERE task_id = %s AND name = ANY(%s)"
            " ORDER BY created_at",
            (task_id, names, task_id, names),
        )
        rows = await cur.fetchall()
    found: dict[str, ToolSpec] = {}
    for row in rows:
        found.setdefault(row["name"], _spec(row["spec"]))
    return found


def _document(specs: list[ToolSpec]) -> tuple[str, str]:
    """The set's JSON and its hash; remembered while the same spec objects come back (a
    reused listing builds its specs once, so most tasks pay a lookup here)."""
    key = tuple(map(id, specs))
    found = _DOCUMENTS.pop(key, None)
    if found is not None:
        _DOCUMENTS[key] = found  # most recently used last: evicted last
        return found[1], found[2]
    document = json.dumps({spec.name: _plain(spec) for spec in specs}, sort_keys=True)
    digest = hashlib.sha256(document.encode()).hexdigest()
    _DOCUMENTS[key] = (tuple(specs), document, digest)  # holding the specs keeps their ids theirs
    if len(_DOCUMENTS) > _REMEMBERED_DOCUMENTS:
        del _DOCUMENTS[next(iter(_DOCUMENTS))]
    return document, digest


def _plain(spec: ToolSpec) -> dict[str, Any]:
    return {f.name: getattr(spec, f.name) for f in fields(spec)}


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
