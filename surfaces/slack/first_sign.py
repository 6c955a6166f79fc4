"""The first visible sign of work, shown by the surface right after a mention is acked.

The task shows that it works from its first activity (the working reaction, the assistant
status, the progress message), but that runs only once the inbox has started the task and a
worker has taken it: seconds under a burst. So as soon as an event that will start a task is
recorded and acked, the surface itself adds the working reaction to the message that asked
(a mention, or a DM), in the background. "Will start" is
decided by the dispatcher's own quick checks, called here, not copied: an agent bound to
the channel (or answering DMs), a person (or listed bot) allowed to trigger it, and not a
message to a task already running in that thread (that steers it, and the steering shows
👀). The task's own first activity then adds the same reaction again, which Slack answers
`already_reacted` (harmless), so the task never shows two signs. In a DM too the sign is the
reaction, not the assistant thread's status: the task sets that status itself a moment
later, and a status, unlike a reaction, would simply be written twice.

When the dispatcher ends up starting no task for the event after all (the agent was removed
meanwhile, a task began running in the thread, ...), `settle` takes the sign back.

Slack's rate tiers: reactions.add is Tier 3 (about 50 a minute per workspace, short bursts
allowed). A sign is only worth showing at once, so it is never queued or retried: a 429
pauses every surface sign for its Retry-After, and while paused, or with too many signs
already in flight, an event gets no surface sign and the task's own sign stands.

Signs are remembered per process: an event dispatched by another replica keeps its sign
(the task it starts takes over; a mention that starts nothing there is rare enough).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from activities.slack.client import bot_client, error_code, retry_after_seconds
from activities.slack.posting import WORKING
from activities.store.agents import agent_for_slack_channel
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.outcome import Outcome
from surfaces.slack.assistant import allowed_bot, dm_agent, is_direct
from surfaces.slack.payloads import HUMAN_SUBTYPES, bot_user_of, from_a_bot
from surfaces.slack.waiting import RecentKeys
from workflows.types import SurfaceContext

if TYPE_CHECKING:
    from surfaces.slack.dispatch import SlackDispatcher

log = logging.getLogger("openloop.slack")

MAX_IN_FLIGHT = 256  # signs on their way at once; beyond this they would only queue
SIGN_TIMEOUT_SECONDS = 3  # a sign later than this is no better than the task's own
# The dispatcher's outcomes that mean a task runs for the event: its sign stays.
TASK_OUTCOMES = frozenset({"started", "started from a DM", "duplicate: task exists"})


class FirstSign:
    """Shows the working sign for recorded events and takes it back when no task starts."""

    def __init__(self, settings: Settings, dispatcher: Callable[[], SlackDispatcher | None]):
        self.settings = settings
        self._dispatcher = dispatcher  # None while the server has no Temporal connection
        self._client: AsyncWebClient | None = None
        self._session: aiohttp.ClientSession | None = None  # one connection pool for every sign
        self._signs: RecentKeys = RecentKeys()  # event id -> its sign's asyncio task
        self._taking_back: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._paused_until = 0.0

    def show(self, payload: dict[str, Any]) -> None:
        """After the ack: show the sign in the background when the event will start a task."""
        event, event_id = payload.get("event"), payload.get("event_id")
        if not isinstance(event, dict) or not isinstance(event_id, str) or not _may_ask(event):
            return
        if self.settings.slack_bot_token is None or self._in_flight >= MAX_IN_FLIGHT:
            return
        if time.monotonic() < self._paused_until:
            return  # Slack asked us to slow down: the task's own sign will do
        self._in_flight += 1
        self._signs.remember(event_id, asyncio.create_task(self._show(payload, event_id)))

    def settle(self, event_id: str, outcome: Outcome) -> None:
        """The dispatcher is done with the event: take the sign back unless a task runs for it."""
        sign = self._signs.pop(event_id, None)
        if isinstance(sign, asyncio.Task) and outcome.note not in TASK_OUTCOMES:
            undo = asyncio.create_task(self._take_back(sign))
            self._taking_back.add(undo)
            undo.add_done_callback(self._taking_back.discard)

    async def _show(self, payload: dict[str, Any], event_id: str) -> SurfaceContext | None:
        try:
            context = await self._will_start(payload, event_id)
            if context is None or time.monotonic() < self._paused_until:
                return None
            await self._slack().reactions_add(
                channel=context.channel, timestamp=str(context.reply_target), name=WORKING
            )
            return context
        except SlackApiError as exc:
            self._note_refusal(exc)
            return None
        except Exception as exc:  # cosmetic: the task shows its own sign either way
            log.info("no surface sign for %s: %s", event_id, type(exc).__name__)
            return None
        finally:
            self._in_flight -= 1

    async def _will_start(self, payload: dict[str, Any], event_id: str) -> SurfaceContext | None:
        """The task's surface context when the dispatcher's quick checks say it will start one."""
        dispatcher = self._dispatcher()
        event = payload["event"]
        channel, user, ts = event.get("channel"), event.get("user"), event.get("ts")
        if dispatcher is None or not (isinstance(channel, str) and isinstance(ts, str)):
            return None
        if from_a_bot(event, bot_user_of(payload)):
            if not await allowed_bot(self.settings, event, bot_user_of(payload)):
                return None
            user = event["bot_id"]
        if not isinstance(user, str):
            return None
        if event.get("type") == "app_mention":
            pool = await get_pool(self.settings.require_database_url())
            agent = await agent_for_slack_channel(pool, channel)
        else:
            agent = await dm_agent(self.settings, channel)
        if agent is None or not await dispatcher.steering.may_trigger(agent, user):
            return None
        thread = str(event.get("thread_ts") or ts)
        if thread != ts and await dispatcher.waiting.find(channel, thread) is not None:
            return None  # it steers the task running there
        return SurfaceContext(
            surface="slack", channel=channel, user=user, thread=thread, event_id=event_id, reply_target=ts
        )

    async def _take_back(self, sign: asyncio.Task[SurfaceContext | None]) -> None:
        context = await sign  # where the sign was shown, None when it was not
        if context is None:
            return
        try:
            await self._slack().reactions_remove(
                channel=context.channel, timestamp=str(context.reply_target), name=WORKING
            )
            log.info("surface sign on %s taken back: no task started", context.reply_target)
        except SlackApiError as exc:
            self._note_refusal(exc)

    def _note_refusal(self, exc: SlackApiError) -> None:
        code = error_code(exc)
        if exc.response.status_code == 429 or code == "ratelimited":
            pause = max(1, retry_after_seconds(exc.response.headers))
            self._paused_until = max(self._paused_until, time.monotonic() + pause)
            log.info("surface signs paused for %d s: Slack rate-limited reactions", pause)
        elif code not in ("already_reacted", "no_reaction", "message_not_found"):
            log.info("surface sign refused: %s", code)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session, self._client = None, None

    def _slack(self) -> AsyncWebClient:
        """The bot's client without the inline 429 wait: a late sign is not worth waiting for.
        Its calls share one HTTP session (slack-sdk opens a new one per call otherwise)."""
        if self._client is None:
            self._session = aiohttp.ClientSession()
            client = bot_client(self.settings)
            client.session = self._session
            client.retry_handlers = [
                h for h in client.retry_handlers if not isinstance(h, AsyncRateLimitErrorRetryHandler)
            ]
            client.timeout = SIGN_TIMEOUT_SECONDS
            self._client = client
        return self._client


def _may_ask(event: dict[str, Any]) -> bool:
    """A mention, or a person's DM: the events that may start a task (checked further later)."""
    if event.get("type") == "app_mention":
        return True
    return event.get("type") == "message" and is_direct(event) and event.get("subtype") in HUMAN_SUBTYPES
