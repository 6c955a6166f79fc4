"""The task transcript in Postgres: append-only, keyed by (task_id, seq).

Appends are idempotent: a retried activity writes the same seq again and the row is
overwritten with what the successful attempt returns, so the stored transcript always
matches the result recorded in workflow history. Large tool outputs live in
`tool_outputs` and are referenced from history by id.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from psycopg import AsyncConnection

from workflows.types import ChatMessage

# More than this is stored in Postgres and referenced, not put in workflow history: the
# model still reads the whole output (the model activity resolves the reference).
TOOL_OUTPUT_PREVIEW_CHARS = 500


def message_to_row(message: ChatMessage) -> dict[str, Any]:
    row = asdict(message)
    row["tool_calls"] = [
        asdict(call) if not isinstance(call, dict) else call for call in message.tool_calls
    ]
    return row


async def append(
    conn: AsyncConnection[Any], task_id: str, first_seq: int, messages: list[dict[str, Any]]
) -> int:
    """Write messages at first_seq, first_seq+1, ...; return the last seq written."""
    seq = first_seq - 1
    for message in messages:
        seq += 1
        await conn.execute(
            "INSERT INTO transcript (task_id, seq, role, message) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (task_id, seq) DO UPDATE SET role = EXCLUDED.role, message = EXCLUDED.message",
            (task_id, seq, message["role"], json.dumps(message)),
        )
    return seq


async def resolve_refs(
    conn: AsyncConnection[Any], messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Replace previews of large tool outputs with their full stored content."""
    resolved = []
    for message in messages:
        ref = message.get("content_ref")
        if ref:
            row = await (
                await conn.execute("SELECT content FROM tool_outputs WHERE ref = %s", (ref,))
            ).fetchone()
            if row is not None:
                message = {**message, "content": row["content"]}
        resolved.append(message)
    return resolved


async def load(conn: AsyncConnection[Any], task_id: str, upto: int) -> list[dict[str, Any]]:
    cursor = await conn.execute(
        "SELECT seq, message FROM transcript WHERE task_id = %s AND seq <= %s ORDER BY seq",
        (task_id, upto),
    )
    return [{**row["message"], "seq": row["seq"]} for row in await cursor.fetchall()]


async def load_one(conn: AsyncConnection[Any], task_id: str, seq: int) -> dict[str, Any] | None:
    row = await (
        await conn.execute(
            "SELECT message FROM transcript WHERE task_id = %s AND seq = %s", (task_id, seq)
        )
    ).fetchone()
    return dict(row["message"]) if row else None


async def store_tool_output(
    conn: AsyncConnection[Any], ref: str, task_id: str, content: str
) -> None:
    await conn.execute(
        "INSERT INTO tool_outputs (ref, task_id, content) VALUES (%s, %s, %s)"
        " ON CONFLICT (ref) DO UPDATE SET content = EXCLUDED.content",
        (ref, task_id, content),
    )
