"""The task transcript in Postgres: append-only, keyed by (task_id, seq).

Appends are idempotent: a retried activity writes the same seq again and the row is
overwritten with what the successful attempt returns, so the stored transcript always
matches the result recorded in workflow history. Large tool outputs live in
`tool_outputs` and are referenced from history and the transcript by id: a transcript row
holds the bounded preview history holds, and no prompt ever carries the whole output.
`load_for_prompt` reads only what `activities.llm.compaction.build_prompt` will use, so a
model call's read stays small on long tasks. The transcript's shape is declared here, for the
prompt builder, the tool-call audit and the offline model alike: how much of a stored tool
output rows and history keep, and the summary rows.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from psycopg import AsyncConnection

from workflows.types import ChatMessage, TranscriptView

# A tool output longer than this is stored in Postgres and referenced (`content_ref`); the
# model and workflow history see this much of it and a note naming the reference.
TOOL_OUTPUT_PREVIEW_CHARS = 500
PLACEHOLDER_PREVIEW_CHARS = 80  # what a compacted older tool result keeps in the prompt
SUMMARY_ROLE = "summary"  # a row holding the model's answer to SUMMARY_INSTRUCTION
SUMMARY_INSTRUCTION = (
    "Summarise the conversation so far for your own later use: the request, what you did, "
    "what tools returned that still matters, decisions made and what is left to do. Be brief."
)


def tool_output_preview(output: str, ref: str) -> str:
    """What history and the prompt hold of a tool output stored as `ref`."""
    return output[:TOOL_OUTPUT_PREVIEW_CHARS] + f"\n[… {len(output)} characters in all, stored as {ref}]"


def message_to_row(message: ChatMessage) -> dict[str, Any]:
    row = asdict(message)
    row["tool_calls"] = [asdict(call) if not isinstance(call, dict) else call for call in message.tool_calls]
    return row


async def append(
    conn: AsyncConnection[Any], task_id: str, first_seq: int, messages: list[dict[str, Any]]
) -> int:
    """Write messages at first_seq, first_seq+1, ...; return the last seq written."""
    params = [
        (task_id, seq, message["role"], json.dumps(message))
        for seq, message in enumerate(messages, start=first_seq)
    ]
    if params:
        # executemany pipelines the statements: one round trip however many messages.
        async with conn.cursor() as cursor:
            await cursor.executemany(
                "INSERT INTO transcript (task_id, seq, role, message) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (task_id, seq) DO UPDATE"
                " SET role = EXCLUDED.role, message = EXCLUDED.message",
                params,
            )
    return first_seq + len(messages) - 1


async def load(conn: AsyncConnection[Any], task_id: str, upto: int) -> list[dict[str, Any]]:
    cursor = await conn.execute(
        "SELECT seq, message FROM transcript WHERE task_id = %s AND seq <= %s ORDER BY seq",
        (task_id, upto),
    )
    return [{**row["message"], "seq": row["seq"]} for row in await cursor.fetchall()]


# The rows build_prompt uses, in one statement: the first system row, the latest summary the
# view adopted, and the messages after it but for the tool results it drops as orphans. The
# tool results it turns into placeholders (all but the newest `keep`) come back with their
# content cut to the preview it shows. One json_agg row parses faster than a row per message.
_PROMPT_ROWS_SQL = """
WITH bounds AS (
    SELECT (
        SELECT min(seq) FROM transcript
        WHERE task_id = %(task_id)s AND seq > %(summary_upto)s AND seq <= %(upto)s
            AND role NOT IN ('system', %(summary_role)s, 'tool')
    ) AS first_seq, CASE WHEN %(keep)s <= 0 THEN %(upto)s + 1 ELSE (
        SELECT seq FROM transcript
        WHERE task_id = %(task_id)s AND seq > %(summary_upto)s AND seq <= %(upto)s
            AND role = 'tool'
        ORDER BY seq DESC OFFSET %(keep)s - 1 LIMIT 1
    ) END AS kept_from
), prompt_rows AS (
    SELECT seq, CASE
        WHEN role = 'tool' AND seq < kept_from
            AND jsonb_typeof(message -> 'content') = 'string'
        THEN jsonb_set(message, '{content}', to_jsonb(left(message ->> 'content', %(preview)s)))
        ELSE message
    END AS message
    FROM transcript, bounds
    WHERE task_id = %(task_id)s AND seq >= first_seq AND seq <= %(upto)s
        AND role NOT IN ('system', %(summary_role)s)
    UNION ALL (
        SELECT seq, message FROM transcript
        WHERE task_id = %(task_id)s AND seq <= %(upto)s AND role = 'system'
        ORDER BY seq LIMIT 1
    )
    UNION ALL (
        SELECT seq, message FROM transcript
        WHERE task_id = %(task_id)s AND seq <= LEAST(%(upto)s, %(summary_upto)s)
            AND role = %(summary_role)s
        ORDER BY seq DESC LIMIT 1
    )
)
SELECT json_agg(prompt_rows ORDER BY seq) AS rows FROM prompt_rows
"""


async def load_for_prompt(
    conn: AsyncConnection[Any], task_id: str, upto: int, view: TranscriptView
) -> list[dict[str, Any]]:
    """The rows of `load(conn, task_id, upto)` that `build_prompt(rows, view)` reads, with
    the content of tool results it compacts cut to their preview: the prompt is the same."""
    cursor = await conn.execute(
        _PROMPT_ROWS_SQL,
        {
            "task_id": task_id,
            "upto": upto,
            "summary_upto": view.summary_upto,
            "keep": view.keep_tool_results,
            "summary_role": SUMMARY_ROLE,
            "preview": PLACEHOLDER_PREVIEW_CHARS,
        },
    )
    found = await cursor.fetchone()
    rows = (found or {}).get("rows") or []
    return [{**row["message"], "seq": row["seq"]} for row in rows]


async def load_one(conn: AsyncConnection[Any], task_id: str, seq: int) -> dict[str, Any] | None:
    row = await (
        await conn.execute("SELECT message FROM transcript WHERE task_id = %s AND seq = %s", (task_id, seq))
    ).fetchone()
    return dict(row["message"]) if row else None


async def store_tool_output(conn: AsyncConnection[Any], ref: str, task_id: str, content: str) -> None:
    await conn.execute(
        "INSERT INTO tool_outputs (ref, task_id, content) VALUES (%s, %s, %s)"
        " ON CONFLICT (ref) DO UPDATE SET content = EXCLUDED.content",
        (ref, task_id, content),
    )
