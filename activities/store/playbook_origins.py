"""How many playbook runs one outside event has started, in Postgres (`playbook_event_runs`).

A run is counted under its origin before it starts; a count is idempotent (a retried publish
finds its run already counted and goes on), and an advisory lock per origin makes two steps
emitting at once count in turn, so the cap holds under concurrency.
"""

from __future__ import annotations

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool


async def count_run(
    pool: AsyncConnectionPool, origin: str, run_id: str, limit: int | None = None, *, counted: str = ""
) -> bool:
    """Count `run_id` among `origin`'s runs (with `counted`, a run already going, first);
    False, counting nothing, when `origin` has `limit` runs already."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"playbook-origin:{origin}",))
        if counted:
            await conn.execute(
                "INSERT INTO playbook_event_runs (origin, run_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (origin, counted),
            )
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT count(*) AS total, coalesce(bool_or(run_id = %s), false) AS already"
            " FROM playbook_event_runs WHERE origin = %s",
            (run_id, origin),
        )
        row = await cursor.fetchone()
        total, already = (int(row["total"]), bool(row["already"])) if row else (0, False)
        if already:
            return True
        if limit is not None and total >= limit:
            return False
        await conn.execute(
            "INSERT INTO playbook_event_runs (origin, run_id) VALUES (%s, %s)", (origin, run_id)
        )
    return True
