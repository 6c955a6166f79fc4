"""One inbox for the surfaces that share it: a delivery is recorded, then dispatched.

A surface records each delivery that could start or reach a task (`record`, before its ack or,
for the Discord Gateway, as the event arrives) under the id the sender gives it, so a retried
delivery adds nothing. The dispatcher hands recorded rows to the surface's handler in the order
they came (a reply steering a task must not overtake the mention that started it). A row stays
unhandled until its handler returned an outcome under 500: a Temporal outage is retried with
backoff, a crash mid-dispatch is picked up when the row's lease runs out, and a restarted server
drains what is left. Slack's own inbox (`surfaces.slack.inbox`) works the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from surfaces.outcome import Outcome

log = logging.getLogger("openloop.surfaces")

LEASE_SECONDS = 30  # a row claimed by a dispatcher that died is retried after this
BATCH = 32
POLL_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
KEEP_HANDLED = "7 days"  # beyond any sender's retries
PRUNE_EVERY_SECONDS = 600.0

Handler = Callable[[dict[str, Any]], Awaitable[Outcome]]


def backoff_seconds(attempts: int) -> float:
    return float(min(MAX_BACKOFF_SECONDS, 2 ** max(0, attempts - 1)))


class SurfaceInbox:
    """The rows of one surface: `record` them, and `run` dispatches them until stopped."""

    def __init__(
        self,
        surface: str,
        pool: Callable[[], Awaitable[AsyncConnectionPool]],
        handler: Callable[[], Handler | None],
    ) -> None:
        self.surface = surface
        self._pool = pool
        self._handler = handler  # None while there is no Temporal connection yet
        self._wake = asyncio.Event()
        self._last_prune = 0.0

    async def record(self, event_id: str, payload: dict[str, Any]) -> bool:
        """Write the delivery durably; False when it was recorded before. Raises when it could
        not be written (the caller must not ack then). A connection that died with a Postgres
        restart fails once; the second try takes a new one."""
        try:
            added = await self._insert(event_id, payload)
        except psycopg.OperationalError:
            added = await self._insert(event_id, payload)
        if added:
            self._wake.set()
        return added

    async def _insert(self, event_id: str, payload: dict[str, Any]) -> bool:
        async with (await self._pool()).connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO surface_inbox (surface, event_id, payload) VALUES (%s, %s, %s) "
                "ON CONFLICT (surface, event_id) DO NOTHING",
                (self.surface, event_id, Jsonb(payload)),
            )
            return cursor.rowcount == 1

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            self._wake.clear()  # before looking, so a row recorded meanwhile wakes the next look
            try:
                while await self.dispatch_due() == BATCH and not stop.is_set():
                    pass
                if loop.time() - self._last_prune > PRUNE_EVERY_SECONDS:
                    await self._prune()
                    self._last_prune = loop.time()
            except Exception:  # Postgres away: rows wait in the table, try again shortly
                log.exception("%s inbox dispatch failed; retrying", self.surface)
            try:
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
            except TimeoutError:
                pass

    async def dispatch_due(self) -> int:
        """Dispatch the rows that are due, in the order they came; how many were claimed."""
        handler = self._handler()
        if handler is None:
            return 0
        pool = await self._pool()
        claimed = await self._claim(pool)
        for event_id, payload, attempts in claimed:
            outcome = await _outcome_of(handler, self.surface, event_id, payload)
            async with pool.connection() as conn:
                if outcome.status < 500:
                    await conn.execute(
                        "UPDATE surface_inbox SET handled_at = now(), outcome = %s "
                        "WHERE surface = %s AND event_id = %s",
                        (outcome.note, self.surface, event_id),
                    )
                else:
                    delay = backoff_seconds(attempts)
                    log.warning(
                        "%s %s not dispatched (%s); attempt %d, next in %.0f s",
                        self.surface,
                        event_id,
                        outcome.note,
                        attempts,
                        delay,
                    )
                    await conn.execute(
                        "UPDATE surface_inbox SET outcome = %s, next_attempt_at = now() + "
                        "make_interval(secs => %s) WHERE surface = %s AND event_id = %s",
                        (outcome.note, delay, self.surface, event_id),
                    )
                    continue
            await outcome.run_followups()
        return len(claimed)

    async def _claim(self, pool: AsyncConnectionPool) -> list[tuple[str, dict[str, Any], int]]:
        async with pool.connection() as conn:
            cursor = await conn.cursor(row_factory=dict_row).execute(
                "UPDATE surface_inbox SET attempts = attempts + 1, "
                "next_attempt_at = now() + make_interval(secs => %s) "
                "WHERE surface = %s AND event_id IN (SELECT event_id FROM surface_inbox "
                "  WHERE surface = %s AND handled_at IS NULL AND next_attempt_at <= now() "
                "  ORDER BY received_at LIMIT %s FOR UPDATE SKIP LOCKED) "
                "RETURNING event_id, payload, attempts, received_at",
                (LEASE_SECONDS, self.surface, self.surface, BATCH),
            )
            rows = sorted(await cursor.fetchall(), key=lambda row: row["received_at"])
        return [(r["event_id"], _as_dict(r["payload"]), r["attempts"]) for r in rows]

    async def _prune(self) -> None:
        async with (await self._pool()).connection() as conn:
            await conn.execute(
                "DELETE FROM surface_inbox WHERE surface = %s AND handled_at < now() - %s::interval",
                (self.surface, KEEP_HANDLED),
            )


async def _outcome_of(handler: Handler, surface: str, event_id: str, payload: dict[str, Any]) -> Outcome:
    try:
        return await handler(payload)
    except Exception as exc:
        log.exception("%s %s dispatch failed", surface, event_id)
        return Outcome(f"failed: {type(exc).__name__}", status=500)


def _as_dict(value: object) -> dict[str, Any]:
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}
