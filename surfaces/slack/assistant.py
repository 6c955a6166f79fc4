"""Direct messages with the agent, and who besides people may reach it.

A DM (Slack's assistant threads: the agent's Messages tab or split view) is a private surface.
The agent that answers DMs is one bound to the DM's channel id, else the one applied last with
`spec.surfaces.slack.assistant: true`.
A message in a thread where a task runs steers that task (`surfaces.slack.steering`); any
other message starts a task that answers in the message's thread, with the thread's status
set while it works. Its memory is the DM's own (`workflows.policy.memory_scope` scopes a DM
task to its DM channel whatever the agent's scope says), so nothing said there is recalled
anywhere else.

Bots: the agent never reacts to its own messages. Another bot may start a task only where
the channel's agent lists its bot id in `spec.surfaces.slack.triggers.bots`; it then acts as
the requester under that id.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client
from temporalio.service import RPCError

from activities.store.agents import TRUST_CACHED_SECONDS, StoredAgent, agent_for_slack_channel, latest_agents
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.outcome import Outcome
from surfaces.slack.payloads import HUMAN_SUBTYPES, strip_mention
from surfaces.slack.steering import Steering
from surfaces.tasks import start_task, task_id_for
from workflows.types import SurfaceContext

log = logging.getLogger("openloop.slack")

MayTrigger = Callable[[StoredAgent, str], Awaitable[bool]]
DEFAULT_DM_REQUEST = "Hello"


def is_direct(event: dict[str, Any]) -> bool:
    """A message in a DM with the agent (channel ids of DMs start with D)."""
    return event.get("channel_type") == "im" or str(event.get("channel") or "").startswith("D")


def own_message(event: dict[str, Any], bot_user: str | None) -> bool:
    return bot_user is not None and event.get("user") == bot_user


async def allowed_bot(settings: Settings, event: dict[str, Any], bot_user: str | None) -> bool:
    """A mention by another bot that the channel's agent lets trigger it (`triggers.bots`)."""
    bot_id = event.get("bot_id")
    if own_message(event, bot_user) or not bot_id or event.get("type") != "app_mention":
        return False
    pool = await get_pool(settings.require_database_url())
    agent = await agent_for_slack_channel(pool, str(event.get("channel") or ""))
    slack = agent.config.spec.surfaces.slack if agent is not None else None
    return slack is not None and bot_id in slack.triggers.bots


async def listed_bots(pool: AsyncConnectionPool) -> frozenset[str]:
    """The bot ids any agent lets trigger it (`triggers.bots`), from the cached agent list."""
    return frozenset(
        bot
        for agent in await latest_agents(pool, TRUST_CACHED_SECONDS)
        if agent.config.spec.surfaces.slack is not None
        for bot in agent.config.spec.surfaces.slack.triggers.bots
    )


async def dm_agent(settings: Settings, channel: str) -> StoredAgent | None:
    """The agent that answers a DM: one bound to that DM channel, else the one applied last
    with `surfaces.slack.assistant`."""
    pool = await get_pool(settings.require_database_url())
    bound = await agent_for_slack_channel(pool, channel)
    if bound is not None:
        return bound
    answering = [
        a
        for a in await latest_agents(pool)
        if a.config.spec.surfaces.slack and a.config.spec.surfaces.slack.assistant
    ]
    return max(answering, key=lambda a: a.applied_at, default=None)


class DirectMessages:
    def __init__(self, settings: Settings, temporal: Client, steering: Steering, may_trigger: MayTrigger):
        self.settings = settings
        self.temporal = temporal
        self.steering = steering
        self.may_trigger = may_trigger

    async def message(self, event: dict[str, Any], event_id: str, bot_user: str | None) -> Outcome:
        channel, user, ts = event.get("channel"), event.get("user"), event.get("ts")
        if event.get("subtype") not in HUMAN_SUBTYPES:
            return Outcome("ignored: not a person's DM")
        if not (isinstance(channel, str) and isinstance(user, str) and isinstance(ts, str)):
            return Outcome("ignored: DM without channel, user or ts")
        thread = str(event.get("thread_ts") or ts)
        text = strip_mention(str(event.get("text") or ""), bot_user)
        if thread != ts:
            steered = await self.steering.message(event_id, channel, thread, ts, user, text)
            if steered is not None:
                return steered
        agent = await dm_agent(self.settings, channel)
        if agent is None or not await self.may_trigger(agent, user):
            return Outcome("ignored: no agent answers DMs for this user")
        context = SurfaceContext(
            surface="slack", channel=channel, user=user, thread=thread, event_id=event_id, reply_target=ts
        )
        task_id = task_id_for("slack", event_id)
        try:
            _, started = await start_task(
                self.temporal, self.settings, agent, context, text or DEFAULT_DM_REQUEST, task_id=task_id
            )
        except RPCError as exc:
            log.error("could not start %s for DM %s: %s", task_id, event_id, exc.status.name)
            return Outcome("start failed", status=503)
        return Outcome("started from a DM" if started else "duplicate: task exists")
