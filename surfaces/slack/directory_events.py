"""Slack events about the workspace rather than a task: a channel renamed, App Home opened.

`channel_rename` (and `group_rename` for private channels): agents are bound to channel
ids, so the binding follows the channel; the stored name is updated, the process's name
cache forgets its channel listing (so `#new-name` resolves at once and `#old-name` no
longer does), and an audit line records the rename for each agent bound there, saying that
agent files naming the old name must be updated before the next apply.

`app_home_opened` (the Home tab): publishes the user's App Home (`activities.slack.app_home`).
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from slack_sdk.errors import SlackApiError
from temporalio.client import Client

from activities.slack import app_home
from activities.slack.client import SlackNotConfigured, bot_client, error_code
from activities.slack.names import directory
from activities.store.agents import agent_for_slack_channel
from activities.store.db import get_pool
from activities.store.ledger import write_audit
from config.settings import Settings
from surfaces.outcome import Outcome
from surfaces.slack.home import home_for
from workflows.types import AuditEvent

log = logging.getLogger("openloop.slack")

RENAME_EVENTS = ("channel_rename", "group_rename")
HOME_EVENT = "app_home_opened"
DIRECTORY_EVENTS = (*RENAME_EVENTS, HOME_EVENT)


async def handle(settings: Settings, temporal: Client, event: dict[str, Any], event_id: str) -> Outcome:
    if event.get("type") in RENAME_EVENTS:
        return await channel_renamed(settings, event, event_id)
    return await home_opened(settings, temporal, event)


async def rename_channel_name(pool: AsyncConnectionPool, channel_id: str, name: str) -> str | None:
    """Store the channel's new name; the name it had before (None when unknown)."""
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "INSERT INTO slack_channel_names AS n (channel_id, name) VALUES (%s, %s) "
            "ON CONFLICT (channel_id) DO UPDATE SET previous_name = n.name, name = EXCLUDED.name, "
            "updated_at = now() WHERE n.name IS DISTINCT FROM EXCLUDED.name "
            "RETURNING previous_name",
            (channel_id, name),
        )
        row = await cursor.fetchone()
    return str(row["previous_name"]) if row and row["previous_name"] else None


async def channel_renamed(settings: Settings, event: dict[str, Any], event_id: str) -> Outcome:
    channel = event.get("channel")
    if not isinstance(channel, dict):
        return Outcome("malformed: channel_rename without a channel", status=400)
    channel_id, name = channel.get("id"), channel.get("name")
    if not (isinstance(channel_id, str) and isinstance(name, str) and channel_id and name):
        return Outcome("malformed: channel_rename without channel id or name", status=400)
    if settings.slack_bot_token is not None:
        directory(settings).forget_channels()
    pool = await get_pool(settings.require_database_url())
    before = await rename_channel_name(pool, channel_id, name)
    agent = await agent_for_slack_channel(pool, channel_id)
    if agent is None:
        return Outcome("renamed: no agent bound there")
    was = f"#{before}" if before else "its old name"
    async with pool.connection() as conn:
        await write_audit(
            conn,
            AuditEvent(
                task_id=f"slack-channel:{channel_id}",
                step=0,
                key=f"rename:{event_id}",
                agent=agent.name,
                workspace=agent.workspace,
                channel=channel_id,
                kind="channel_renamed",
                actor="slack",
                outcome=(
                    f"{was} is now #{name}; {agent.name} stays bound (by id {channel_id}); "
                    f"agent files naming {was} need #{name} before the next apply"
                ),
            ),
        )
    log.info("slack channel %s renamed %s -> #%s; %s follows it", channel_id, was, name, agent.name)
    return Outcome(f"renamed: {agent.name} follows {channel_id}")


async def home_opened(settings: Settings, temporal: Client, event: dict[str, Any]) -> Outcome:
    user = event.get("user")
    if event.get("tab", "home") != "home" or not isinstance(user, str):
        return Outcome("ignored: not the home tab")
    pool = await get_pool(settings.require_database_url())
    home = await home_for(pool, temporal, user)
    try:
        await bot_client(settings).views_publish(user_id=user, view=app_home.home_view(home))
    except (SlackApiError, SlackNotConfigured) as exc:
        reason = error_code(exc) if isinstance(exc, SlackApiError) else "not configured"
        log.warning("App Home for %s not published: %s", user, reason)
        return Outcome(f"home not published: {reason}")
    return Outcome("home published")
