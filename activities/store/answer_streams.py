"""The Slack messages a model call streamed its answer into (table `answer_streams`).

Written the moment Slack created the streamed message, before any more text goes into it,
so an attempt that dies mid-answer still leaves the message findable: the retry removes it
(`activities.slack.streaming`), and a retry that finds the answer already stored hands the
message on to the closing reply instead. Pruned by the daily retention run (`prune`).
"""

from __future__ import annotations

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

# A row is only read by the retries of the model call that streamed (about an hour at most,
# `workflows.activity_options.MODEL_RETRY`); the daily retention run deletes older ones.
KEEP_STREAMS = "1 day"


async def started(pool: AsyncConnectionPool, task_id: str, step: int, channel: str, ts: str) -> None:
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO answer_streams (task_id, step, channel, ts) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (task_id, step, channel, ts),
        )


async def of_step(pool: AsyncConnectionPool, task_id: str, step: int) -> list[tuple[str, str]]:
    """(channel, ts) of every stream this step's attempts started, oldest first."""
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT channel, ts FROM answer_streams WHERE task_id = %s AND step = %s ORDER BY started_at, ts",
            (task_id, step),
        )
        return [(row["channel"], row["ts"]) for row in await cursor.fetchall()]


async def forget(pool: AsyncConnectionPool, task_id: str, step: int, ts: str) -> None:
    async with pool.connection() as conn:
        await conn.execute(
            "DELETE FROM answer_streams WHERE task_id = %s AND step = %s AND ts = %s", (task_id, step, ts)
        )


async def prune(pool: AsyncConnectionPool) -> int:
    """Delete the rows no model call can look for anymore; how many."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "DELETE FROM answer_streams WHERE started_at < now() - %s::interval", (KEEP_STREAMS,)
        )
        return cursor.rowcount
