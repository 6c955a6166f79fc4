"""The Discord Gateway: how messages reach us, through discord.py's client.

Discord delivers channel messages only over the Gateway (a websocket the bot keeps open; no
HTTP webhook carries them), so the surfaces server holds one session while it runs: discord.py
identifies with the guild-messages, message-content and members intents, heartbeats, resumes
after a drop (Discord replays what was missed) and reconnects with backoff. Each message that
mentions the bot, or is posted in a thread, is recorded in the inbox under its message id (a
replayed or twice-seen message adds nothing) and dispatched from there
(`surfaces.discord.dispatch`). Buttons and slash commands come over HTTP instead
(`surfaces.discord.interactions`), where Discord signs them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from activities.discord.client import discord_call
from config.settings import Settings
from surfaces.discord.events import DiscordMessage, request_text
from surfaces.inbox import SurfaceInbox

log = logging.getLogger("openloop.discord")

RETRY_SECONDS = 5.0  # after a failed login (a bad token is reported and retried slowly)
RECORD_ATTEMPTS = 5  # about half a minute of Postgres being away


def to_record(message: Any, bot_id: int | None) -> DiscordMessage | None:
    """What the inbox keeps of a discord.py `Message`, or None when no task cares about it."""
    import discord

    if message.author.bot or message.guild is None:
        return None  # our own posts, other bots, and DMs (not served yet)
    channel = message.channel
    in_thread = isinstance(channel, discord.Thread)
    mentions_bot = bot_id is not None and bot_id in message.raw_mentions
    if not (mentions_bot or in_thread):
        return None
    parent = channel.parent if in_thread else None
    roles = [r for r in getattr(message.author, "roles", []) if not r.is_default()]
    return DiscordMessage(
        message_id=str(message.id),
        channel_id=str(channel.id),
        channel_name=(parent.name if parent is not None else None)
        if in_thread
        else getattr(channel, "name", None),
        parent_id=str(channel.parent_id) if in_thread else None,
        guild_id=str(message.guild.id),
        author_id=str(message.author.id),
        author_name=str(getattr(message.author, "display_name", message.author.name)),
        content=request_text(message.content or "", str(bot_id)) if mentions_bot else (message.content or ""),
        mentions_bot=mentions_bot,
        role_ids=[str(r.id) for r in roles],
        role_names=[r.name for r in roles],
    )


def gateway_runner(settings: Settings, inbox: SurfaceInbox) -> Any:
    """A background runner (`surfaces.background`) holding the Gateway session until stopped."""

    async def run(stop: asyncio.Event) -> None:
        import discord
        from discord.http import Route

        assert settings.discord_bot_token is not None
        Route.BASE = settings.discord_api_url.rstrip("/")
        await _use_announced_gateway(settings, stop)
        intents = discord.Intents(guilds=True, guild_messages=True, message_content=True, members=True)
        while not stop.is_set():
            client = _client(discord, intents, inbox)
            session = asyncio.create_task(client.start(settings.discord_bot_token.get_secret_value()))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({session, stopping}, return_when=asyncio.FIRST_COMPLETED)
            await client.close()
            stopping.cancel()
            if session.done() and not session.cancelled() and session.exception() is not None:
                log.error("discord gateway stopped: %s; again in %.0f s", session.exception(), RETRY_SECONDS)
                try:
                    await asyncio.wait_for(stop.wait(), RETRY_SECONDS)
                except TimeoutError:
                    pass

    return run


async def _use_announced_gateway(settings: Settings, stop: asyncio.Event) -> None:
    """Connect where `GET /gateway/bot` says, as Discord asks, rather than discord.py's fixed
    default (which also lets a stand-in for discord.com announce its own Gateway)."""
    import yarl
    from discord.gateway import DiscordWebSocket

    while not stop.is_set():
        try:
            announced = await discord_call(settings, "GET", "/gateway/bot")
        except Exception as exc:  # a bad token or Discord away: said, and tried again
            log.error("discord: GET /gateway/bot failed: %s; again in %.0f s", exc, RETRY_SECONDS)
            try:
                await asyncio.wait_for(stop.wait(), RETRY_SECONDS)
            except TimeoutError:
                pass
            continue
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(str(announced["url"]))
        return


def _client(discord: Any, intents: Any, inbox: SurfaceInbox) -> Any:
    class GatewayClient(discord.Client):  # type: ignore[misc,name-defined]
        async def on_ready(self) -> None:
            log.info("discord gateway ready as %s (%s)", self.user, self.user.id if self.user else "?")

        async def on_message(self, message: Any) -> None:
            record = to_record(message, self.user.id if self.user else None)
            if record is None:
                return
            for attempt in range(RECORD_ATTEMPTS):
                try:
                    added = await inbox.record(record.message_id, record.as_payload())
                except Exception:  # Postgres away: the Gateway will not send it again
                    log.exception(
                        "discord %s could not be recorded (attempt %d)", record.message_id, attempt + 1
                    )
                    await asyncio.sleep(2**attempt)
                    continue
                if not added:
                    log.info("discord %s seen again: already recorded", record.message_id)
                return
            log.error("discord %s was not recorded: Postgres stayed away", record.message_id)

    return GatewayClient(intents=intents)
