"""The Slack inbox: events are recorded in Postgres before the ack and dispatched right after.

Slack waits at most 3 seconds for an ack and retries what it does not get. Starting a
workflow costs a Temporal round trip that a busy server can stretch, so the ack does only
the durable part: one INSERT keyed by Slack's event_id (a redelivery adds nothing). The
dispatcher then starts or signals the task for each recorded event. A row stays unhandled
until that succeeded: a Temporal outage is retried with backoff, a crash mid-dispatch is
picked up again when the row's lease runs out, and a restarted server drains what is left.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from surfaces.outcome import Outcome
from surfaces.slack.assistant import is_direct, listed_bots, own_message
from surfaces.slack.directory_events import DIRECTORY_EVENTS
from surfaces.slack.payloads import HUMAN_SUBTYPES, bot_user_of, from_a_bot

if TYPE_CHECKING:
    from surfaces.slack.first_sign import FirstSign

log = logging.getLogger("openloop.slack")

LEASE_SECONDS = 30  # a row claimed by a dispatcher that died is retried after this
BATCH = 64  # rows claimed at once
# Starts in flight at once. Starts share the event loop (and the machine) with the acks:
# a burst is recorded at full speed and started a few at a time, so acks stay fast and the
# backlog drains as fast as Temporal takes starts.
CONCURRENCY = 4
POLL_SECONDS = 1.0  # rows recorded by another replica, and retries that came due
MAX_BACKOFF_SECONDS = 60.0
KEEP_HANDLED = "7 days"  # far beyond Slack's retries, which end within the hour
PRUNE_EVERY_SECONDS = 600.0


def not_worth_recording(payload: dict[str, Any], allowed_bots: frozenset[str] = frozenset()) -> str | None:
    """Why an event cannot start or reach a task (so the ack needs no row), or None.

    Only checks that need no I/O (`allowed_bots`: the bot ids some agent lets trigger it, read
    by the caller): the dispatcher checks everything again.
    """
    event = payload.get("event")
    if payload.get("type") != "event_callback" or not isinstance(event, dict):
        return "not an event callback"
    bot_user = bot_user_of(payload)
    if from_a_bot(event, bot_user):
        # Another bot's mention may be one an agent lets in (`triggers.bots`); never our own.
        listed = event.get("type") == "app_mention" and event.get("bot_id") in allowed_bots
        if own_message(event, bot_user) or not listed:
            return "from a bot"
    if event.get("type") in ("app_mention", *DIRECTORY_EVENTS):
        return None
    if event.get("type") == "message":
        if is_direct(event) and event.get("subtype") in HUMAN_SUBTYPES:
            return None  # a DM with the agent: it starts or steers a task
        thread, ts = event.get("thread_ts"), event.get("ts")
        if event.get("subtype") not in HUMAN_SUBTYPES or not thread or thread == ts:
            return "not a reply in a thread"
        return None
    return f"event type {event.get('type')!r}"


async def record(pool: AsyncConnectionPool, event_id: str, payload: dict[str, Any], retry_num: int) -> bool:
    """Write the event durably; False when Slack delivered this event_id before.

    The ack's pool does not test connections before use (a round trip each): a connection
    that died with a Postgres restart fails here once, and the second try takes a new one.
    """
    try:
        return await _insert(pool, event_id, payload, retry_num)
    except psycopg.OperationalError:
        return await _insert(pool, event_id, payload, retry_num)


async def _insert(pool: AsyncConnectionPool, event_id: str, payload: dict[str, Any], retry_num: int) -> bool:
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "INSERT INTO slack_inbox (event_id, payload, retry_num) VALUES (%s, %s, %s) "
            "ON CONFLICT (event_id) DO NOTHING",
            (event_id, Jsonb(payload), retry_num),
        )
        return cursor.rowcount == 1


@dataclass(frozen=True)
class InboxEvent:
    event_id: str
    payload: dict[str, Any]
    retry_num: int
    attempts: int


Handler = Callable[[dict[str, Any], str | None], Awaitable[Outcome]]


def backoff_seconds(attempts: int) -> float:
    return float(min(MAX_BACKOFF_SECONDS, 2 ** max(0, attempts - 1)))


class InboxDispatcher:
    """Claims due rows and hands each to the Slack dispatcher, until stopped."""

    def __init__(
        self,
        pool: Callable[[], Awaitable[AsyncConnectionPool]],
        handler: Callable[[], Handler | None],
        first_sign: FirstSign | None = None,
    ):
        self._pool = pool
        self._handler = handler  # None while there is no Temporal connection yet
        self._first_sign = first_sign  # shows work before the task can (`surfaces.slack.first_sign`)
        self._wake = asyncio.Event()
        self._last_prune = 0.0

    def wake(self) -> None:
        """A new row is in: look now instead of at the next poll."""
        self._wake.set()

    async def accept(self, payload: dict[str, Any], retry_num: int) -> Outcome:
        """Before the ack: record an event that could start or reach a task.

        Raises when the row could not be written: the caller must not ack then.
        """
        event_id = payload.get("event_id")
        if payload.get("type") == "event_callback" and (
            not isinstance(payload.get("event"), dict) or not isinstance(event_id, str) or not event_id
        ):
            return Outcome("malformed: no event or event_id", status=400)
        event = payload.get("event")
        asks = isinstance(event, dict) and bool(event.get("bot_id")) and event.get("type") == "app_mention"
        ignored = not_worth_recording(payload, await listed_bots(await self._pool()) if asks else frozenset())
        if ignored is not None:
            return Outcome(f"ignored: {ignored}")
        assert isinstance(event_id, str)
        if await record(await self._pool(), event_id, payload, retry_num):
            self.wake()
            if self._first_sign is not None:
                self._first_sign.show(payload)  # in the background: the ack does not wait
            return Outcome("recorded")
        log.info("slack %s duplicate delivery (retry %s): already recorded", event_id, retry_num)
        return Outcome("duplicate: already recorded")

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            self._wake.clear()  # before looking, so a row recorded meanwhile wakes the next look
            try:
                while await self.dispatch_due() == BATCH and not stop.is_set():
                    pass
                if loop.time() - self._last_prune > PRUNE_EVERY_SECONDS:
                    await self.prune()
                    self._last_prune = loop.time()
            except Exception:  # Postgres away: rows wait in the table, try again shortly
                log.exception("slack inbox dispatch failed; retrying")
            try:
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
            except TimeoutError:
                pass
        if self._first_sign is not None:
            await self._first_sign.close()

    async def dispatch_due(self) -> int:
        """Dispatch the rows that are due (at most one batch); how many were claimed."""
        handler = self._handler()
        if handler is None:
            return 0
        pool = await self._pool()
        claimed = await self._claim(pool)
        gate = asyncio.Semaphore(CONCURRENCY)
        # Replies in threads go one at a time in the order Slack sent them, so a task waiting
        # for an answer gets the first answer first; new tasks start side by side.
        mentions = [e for e in claimed if _event_type(e) != "message"]
        replies = [e for e in claimed if _event_type(e) == "message"]

        async def dispatch(event: InboxEvent) -> Outcome:
            async with gate:
                return await _outcome_of(handler, event)

        async def in_order() -> list[Outcome]:
            return [await dispatch(event) for event in replies]

        started, answered = await asyncio.gather(asyncio.gather(*(dispatch(e) for e in mentions)), in_order())
        outcomes = [*zip(mentions, started, strict=True), *zip(replies, answered, strict=True)]
        done = [(e, o) for e, o in outcomes if o.status < 500]
        retry = [(e, o) for e, o in outcomes if o.status >= 500]
        async with pool.connection() as conn:
            if done:  # one statement for the batch: a start costs enough round trips already
                await conn.execute(
                    "UPDATE slack_inbox AS i SET handled_at = now(), outcome = d.outcome "
                    "FROM unnest(%s::text[], %s::text[]) AS d(event_id, outcome) "
                    "WHERE i.event_id = d.event_id",
                    ([e.event_id for e, _ in done], [o.note for _, o in done]),
                )
            for event, outcome in retry:
                delay = backoff_seconds(event.attempts)
                log.warning(
                    "slack %s not dispatched (%s); attempt %d, next in %.0f s",
                    event.event_id,
                    outcome.note,
                    event.attempts,
                    delay,
                )
                await conn.execute(
                    "UPDATE slack_inbox SET outcome = %s, "
                    "next_attempt_at = now() + make_interval(secs => %s) WHERE event_id = %s",
                    (outcome.note, delay, event.event_id),
                )
        for event, outcome in done:
            if self._first_sign is not None:
                self._first_sign.settle(event.event_id, outcome)
            if outcome.status >= 400:
                log.warning("slack %s rejected: %s", event.event_id, outcome.note)
            await outcome.run_followups()
        return len(claimed)

    async def _claim(self, pool: AsyncConnectionPool) -> list[InboxEvent]:
        async with pool.connection() as conn:
            cursor = await conn.cursor(row_factory=dict_row).execute(
                "UPDATE slack_inbox SET attempts = attempts + 1, "
                "next_attempt_at = now() + make_interval(secs => %s) "
                "WHERE event_id IN (SELECT event_id FROM slack_inbox "
                "  WHERE handled_at IS NULL AND next_attempt_at <= now() "
                "  ORDER BY received_at LIMIT %s FOR UPDATE SKIP LOCKED) "
                "RETURNING event_id, payload, retry_num, attempts, received_at",
                (LEASE_SECONDS, BATCH),
            )
            rows = sorted(await cursor.fetchall(), key=lambda row: row["received_at"])
        return [
            InboxEvent(r["event_id"], _as_dict(r["payload"]), r["retry_num"], r["attempts"]) for r in rows
        ]

    async def prune(self) -> None:
        pool = await self._pool()
        async with pool.connection() as conn:
            await conn.execute(
                "DELETE FROM slack_inbox WHERE handled_at < now() - %s::interval", (KEEP_HANDLED,)
            )


async def backlog(pool: AsyncConnectionPool) -> int:
    """Recorded events not yet started or signalled."""
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT count(*) AS n FROM slack_inbox WHERE handled_at IS NULL"
        )
        row = await cursor.fetchone()
        return int(row["n"]) if row else 0


def _event_type(event: InboxEvent) -> object:
    inner = event.payload.get("event")
    return inner.get("type") if isinstance(inner, dict) else None


async def _outcome_of(handler: Handler, event: InboxEvent) -> Outcome:
    try:
        return await handler(event.payload, str(event.retry_num) if event.retry_num else None)
    except Exception as exc:
        log.exception("slack %s dispatch failed", event.event_id)
        return Outcome(f"failed: {type(exc).__name__}", status=500)


def _as_dict(value: object) -> dict[str, Any]:
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}
