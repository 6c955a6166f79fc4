"""The Slack inbox on real Postgres: what the ack records, and how recorded events are
dispatched, retried after a failure, taken over after a crash, and pruned."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from psycopg_pool import AsyncConnectionPool

from activities.store.db import get_pool
from config.settings import Settings
from surfaces.outcome import Outcome
from surfaces.slack import inbox
from tests.fakes.slack_api import BOT_USER
from tests.integration.slack_env import mention, pending_only


def event(**extra: Any) -> dict[str, Any]:
    return mention("C" + uuid.uuid4().hex[:10].upper(), **extra)


async def row(pool: AsyncConnectionPool, event_id: str) -> dict[str, Any]:
    async with pool.connection() as conn:
        found = await (
            await conn.execute(
                "SELECT *, next_attempt_at > now() AS waiting FROM slack_inbox WHERE event_id = %s",
                (event_id,),
            )
        ).fetchone()
    assert found is not None
    return dict(found)


class Handler:
    """Stands in for the Slack dispatcher: answers with a given status, records calls."""

    def __init__(self, status: int = 200):
        self.status = status
        self.calls: list[tuple[str, str | None]] = []

    async def __call__(self, payload: dict[str, Any], retry: str | None) -> Outcome:
        self.calls.append((payload["event_id"], retry))
        return Outcome("started" if self.status < 400 else "start failed", status=self.status)


def dispatcher(db_settings: Settings, handler: Handler | None) -> inbox.InboxDispatcher:
    async def pool() -> AsyncConnectionPool:
        return await get_pool(db_settings.require_database_url(), checked=False)

    return inbox.InboxDispatcher(pool, lambda: handler)


def test_only_events_that_could_start_or_reach_a_task_are_worth_a_row() -> None:
    assert inbox.not_worth_recording(event()) is None
    thread_reply = event(thread_ts="1699999999.000001")
    thread_reply["event"]["type"] = "message"
    assert inbox.not_worth_recording(thread_reply) is None
    top_level = event()
    top_level["event"]["type"] = "message"
    assert inbox.not_worth_recording(top_level) == "not a reply in a thread"
    edited = event(thread_ts="1699999999.000001", subtype="message_changed")
    edited["event"]["type"] = "message"
    assert inbox.not_worth_recording(edited) == "not a reply in a thread"
    assert inbox.not_worth_recording(event(bot_id="B1")) == "from a bot"
    assert inbox.not_worth_recording(event(user=BOT_USER)) == "from a bot"
    reaction = event()
    reaction["event"]["type"] = "reaction_added"
    assert inbox.not_worth_recording(reaction) == "event type 'reaction_added'"


async def test_a_redelivery_adds_no_row_and_a_malformed_event_is_refused(db_settings: Settings) -> None:
    events = dispatcher(db_settings, None)
    payload = event()
    assert (await events.accept(payload, 0)).note == "recorded"
    assert (await events.accept(payload, 1)).note == "duplicate: already recorded"
    pool = await get_pool(db_settings.require_database_url())
    recorded = await row(pool, payload["event_id"])
    assert recorded["retry_num"] == 0 and recorded["handled_at"] is None
    assert recorded["payload"]["event"]["text"] == payload["event"]["text"]
    malformed = {"type": "event_callback", "event": {"type": "app_mention"}}
    assert (await events.accept(malformed, 0)).status == 400


async def test_a_failed_dispatch_is_retried_later_and_a_success_is_marked_once(
    db_settings: Settings,
) -> None:
    pool = await get_pool(db_settings.require_database_url())
    payload = event()
    failing, working = Handler(status=503), Handler()
    await dispatcher(db_settings, failing).accept(payload, 2)
    await pending_only(pool, payload["event_id"])

    assert await dispatcher(db_settings, failing).dispatch_due() == 1
    after_failure = await row(pool, payload["event_id"])
    assert after_failure["handled_at"] is None and after_failure["attempts"] == 1
    assert after_failure["outcome"] == "start failed" and after_failure["waiting"]
    assert await dispatcher(db_settings, working).dispatch_due() == 0  # not due yet: backoff

    async with pool.connection() as conn:  # the backoff runs out
        await conn.execute(
            "UPDATE slack_inbox SET next_attempt_at = now() WHERE event_id = %s", (payload["event_id"],)
        )
    assert await dispatcher(db_settings, working).dispatch_due() == 1
    handled = await row(pool, payload["event_id"])
    assert handled["handled_at"] is not None and handled["outcome"] == "started"
    assert handled["attempts"] == 2
    assert await dispatcher(db_settings, working).dispatch_due() == 0
    assert failing.calls == [(payload["event_id"], "2")]  # Slack's retry number is kept
    assert working.calls == [(payload["event_id"], "2")]


async def test_a_row_claimed_by_a_dispatcher_that_died_is_taken_over_after_its_lease(
    db_settings: Settings,
) -> None:
    pool = await get_pool(db_settings.require_database_url())
    payload = event()
    await dispatcher(db_settings, None).accept(payload, 0)
    await pending_only(pool, payload["event_id"])
    async with pool.connection() as conn:  # claimed, then the process died before marking it
        await conn.execute(
            "UPDATE slack_inbox SET attempts = 1, next_attempt_at = now() + interval '30 seconds' "
            "WHERE event_id = %s",
            (payload["event_id"],),
        )
    survivor = Handler()
    assert await dispatcher(db_settings, survivor).dispatch_due() == 0  # the lease still holds
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE slack_inbox SET next_attempt_at = now() WHERE event_id = %s", (payload["event_id"],)
        )
    assert await dispatcher(db_settings, survivor).dispatch_due() == 1
    assert (await row(pool, payload["event_id"]))["outcome"] == "started"


async def test_handled_rows_are_pruned_after_a_week_and_unhandled_ones_never(
    db_settings: Settings,
) -> None:
    pool = await get_pool(db_settings.require_database_url())
    events = dispatcher(db_settings, None)
    old_handled, recent_handled, old_unhandled = event(), event(), event()
    for payload in (old_handled, recent_handled, old_unhandled):
        await events.accept(payload, 0)
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE slack_inbox SET handled_at = now() - interval '8 days' WHERE event_id = %s",
            (old_handled["event_id"],),
        )
        await conn.execute(
            "UPDATE slack_inbox SET handled_at = now() WHERE event_id = %s", (recent_handled["event_id"],)
        )
        await conn.execute(
            "UPDATE slack_inbox SET received_at = now() - interval '30 days' WHERE event_id = %s",
            (old_unhandled["event_id"],),
        )
    await events.prune()
    async with pool.connection() as conn:
        left = {
            r["event_id"]
            for r in await (
                await conn.execute(
                    "SELECT event_id FROM slack_inbox WHERE event_id = ANY(%s)",
                    ([p["event_id"] for p in (old_handled, recent_handled, old_unhandled)],),
                )
            ).fetchall()
        }
    assert left == {recent_handled["event_id"], old_unhandled["event_id"]}


def test_backoff_doubles_and_is_capped() -> None:
    assert [inbox.backoff_seconds(n) for n in (1, 2, 3, 4, 8, 30)] == [1, 2, 4, 8, 60, 60]


async def test_replies_in_threads_reach_their_tasks_in_the_order_slack_sent_them(
    db_settings: Settings,
) -> None:
    pool = await get_pool(db_settings.require_database_url())
    finished: list[str] = []
    slow_first = {}

    async def answering(payload: dict[str, Any], retry: str | None) -> Outcome:
        await asyncio.sleep(slow_first.get(payload["event_id"], 0.0))
        finished.append(payload["event_id"])
        return Outcome("signalled user_message")

    replies = []
    for delay in (0.3, 0.2, 0.1, 0.0):
        reply = event(thread_ts="1699999999.000001")
        reply["event"]["type"] = "message"
        slow_first[reply["event_id"]] = delay
        replies.append(reply["event_id"])
        await dispatcher(db_settings, None).accept(reply, 0)
    await pending_only(pool, *replies)

    async def db() -> AsyncConnectionPool:
        return pool

    assert await inbox.InboxDispatcher(db, lambda: answering).dispatch_due() == 4
    assert finished == replies  # the slowest, sent first, still went first
