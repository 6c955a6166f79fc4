"""Repair loops in Postgres: the loop row, round reports, command outputs and workspace diffs.

Outputs and diffs are bytes that never enter workflow history: a report refers to an output
by id, a round to its diff by content hash, so a rebuilt workspace on another worker and
`openloop loops logs` read the same rows.
"""

from __future__ import annotations

import hashlib
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from workflows.loop_types import LoopResult, LoopSpec, RoundReport


async def start(pool: AsyncConnectionPool, loop_id: str, spec: LoopSpec, started_by: str) -> None:
    """The loop's row; a retried or re-run start keeps the first."""
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO loops (loop_id, name, spec, started_by) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (loop_id) DO NOTHING",
            (loop_id, spec.name, Jsonb(spec.model_dump(mode="json")), started_by),
        )


async def record_round(pool: AsyncConnectionPool, report: RoundReport) -> None:
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO loop_rounds (loop_id, round, report) VALUES (%s, %s, %s)"
            " ON CONFLICT (loop_id, round) DO UPDATE SET report = EXCLUDED.report, recorded_at = now()",
            (report.loop_id, report.round, Jsonb(report.model_dump(mode="json"))),
        )


async def finish(pool: AsyncConnectionPool, result: LoopResult) -> None:
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE loops SET status = %s, reason = %s, next_action = %s, finished_at = now()"
            " WHERE loop_id = %s",
            (result.status.value, result.reason, result.next_action, result.loop_id),
        )


async def save_output(
    pool: AsyncConnectionPool,
    loop_id: str,
    round_: int,
    step: str,
    attempt: str,
    output: bytes,
    truncated: bool,
) -> int:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "INSERT INTO loop_outputs (loop_id, round, step, attempt, output, truncated)"
            " VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (loop_id, round, step, attempt)"
            " DO UPDATE SET output = EXCLUDED.output, truncated = EXCLUDED.truncated"
            " RETURNING output_id",
            (loop_id, round_, step, attempt, output, truncated),
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row["output_id"])


async def save_diff(pool: AsyncConnectionPool, diff: bytes) -> str:
    """Store a diff under its SHA-256 (once, however many rounds or loops produce it)."""
    sha = hashlib.sha256(diff).hexdigest()
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO workspace_diffs (sha256, diff) VALUES (%s, %s) ON CONFLICT (sha256) DO NOTHING",
            (sha, diff),
        )
    return sha


async def load_diff(pool: AsyncConnectionPool, sha: str) -> bytes | None:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT diff FROM workspace_diffs WHERE sha256 = %s", (sha,))
        row = await cur.fetchone()
    return None if row is None else bytes(row["diff"])


async def loop_row(pool: AsyncConnectionPool, loop_id: str) -> dict[str, Any] | None:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT * FROM loops WHERE loop_id = %s", (loop_id,))
        return await cur.fetchone()


async def reports(pool: AsyncConnectionPool, loop_id: str) -> list[RoundReport]:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT report FROM loop_rounds WHERE loop_id = %s ORDER BY round", (loop_id,))
        rows = await cur.fetchall()
    return [RoundReport.model_validate(row["report"]) for row in rows]


async def outputs(
    pool: AsyncConnectionPool, loop_id: str, round_: int | None = None, step: str | None = None
) -> list[dict[str, Any]]:
    """Stored outputs in run order (round, then when recorded), optionally one round or step."""
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "SELECT output_id, round, step, attempt, output, truncated FROM loop_outputs"
            " WHERE loop_id = %s AND (%s::int IS NULL OR round = %s) AND (%s::text IS NULL OR step = %s)"
            " ORDER BY round, output_id",
            (loop_id, round_, round_, step, step),
        )
        return list(await cur.fetchall())


async def recent_loops(pool: AsyncConnectionPool, limit: int = 20) -> list[dict[str, Any]]:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "SELECT loop_id, name, status, reason, started_at, finished_at,"
            " (SELECT count(*) FROM loop_rounds r WHERE r.loop_id = l.loop_id) AS rounds"
            " FROM loops l ORDER BY started_at DESC LIMIT %s",
            (limit,),
        )
        return list(await cur.fetchall())
