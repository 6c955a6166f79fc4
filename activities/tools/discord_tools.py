"""Discord tools an agent may call: `discord.read_thread` and `discord.post_message`.

Both default to where the task was asked (its thread, or its channel). Reading lists the
messages oldest first with their authors' names; what it returns is data from people, and the
model reads it inside an untrusted-data block like every tool result. Posting is written once
per tool call (`activities.discord.surface`'s find-or-post, keyed by the call's idempotency key)
and only to the agent's own Discord channels (`WriteBound.DISCORD_CHANNELS`, or the grant's
`limit_to`); a channel may be named as the agent names it (`eng`) or by id.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from activities.discord.client import DiscordNotConfigured, activity_error, discord_call, http_status
from activities.discord.messages import split_content
from activities.discord.surface import bot_id
from activities.runtime import Runtime
from activities.tool_errors import ToolError, ToolErrorKind
from activities.tools.native import NonEmpty, ToolArgs, native_tool
from config.settings import Settings
from workflows.tool_catalog import WriteBound
from workflows.types import ToolCallInput

MAX_MESSAGES = 100  # Discord's largest page


class ReadDiscordArgs(ToolArgs):
    channel: NonEmpty | None = Field(
        default=None, description="a channel or thread id; defaults to the task's"
    )
    limit: int = Field(default=50, ge=1, le=MAX_MESSAGES, description="how many recent messages")


class PostDiscordArgs(ToolArgs):
    channel: NonEmpty | None = Field(default=None, description="defaults to the task's thread or channel")
    text: NonEmpty


def _tool_error(exc: Exception, doing: str) -> Exception:
    if isinstance(exc, DiscordNotConfigured):
        return ToolError(ToolErrorKind.FAILED, str(exc))
    status = http_status(exc)
    if status in (403, 401):
        return ToolError(
            ToolErrorKind.PERMISSION, f"Discord refused to {doing}: the bot lacks the permission"
        )
    if status == 404:
        return ToolError(ToolErrorKind.NOT_FOUND, f"Discord could not {doing}: no such channel")
    return activity_error(exc, doing)


def _own_place(inp: ToolCallInput) -> str | None:
    context = inp.context
    return (context.thread or context.channel) if context.surface == "discord" else None


def _asked_in_channel(inp: ToolCallInput) -> bool:
    """Asked by a mention in a channel: the conversation is the channel's, up to the mention."""
    context = inp.context
    return (
        context.surface == "discord" and context.thread is not None and context.thread == context.reply_target
    )


async def _channel_id(settings: Settings, inp: ToolCallInput, named: str) -> str:
    """A channel named as the agent names it (`eng`, `#eng`) or by id, as an id."""
    if named.isdigit():
        return named
    wanted = named.removeprefix("#").lower()
    for guild in await discord_call(settings, "GET", "/users/@me/guilds") or []:
        channels = await discord_call(
            settings, "GET", "/guilds/{guild_id}/channels", guild_id=str(guild["id"])
        )
        for channel in channels or []:
            if str(channel.get("name", "")).lower() == wanted:
                return str(channel["id"])
    raise ToolError(ToolErrorKind.NOT_FOUND, f"no Discord channel named {named!r} in the bot's servers")


@native_tool(
    "discord.read_thread",
    ReadDiscordArgs,
    "Read the recent messages of the current Discord thread (or a channel), with author names.",
    permission="read_message_history",
    writes=False,
)
async def read_thread(args: ReadDiscordArgs, inp: ToolCallInput, rt: Runtime) -> str:
    up_to: int | None = None
    if args.channel is None and _asked_in_channel(inp):
        place: str | None = inp.context.channel
        up_to = int(str(inp.context.reply_target))  # snowflakes grow with time
    else:
        place = args.channel or _own_place(inp)
    if place is None:
        raise ToolError(ToolErrorKind.INVALID, "give channel: this task did not start in Discord")
    try:
        place = await _channel_id(rt.settings, inp, place)
        found: list[dict[str, Any]] = await discord_call(
            rt.settings, "GET", "/channels/{channel_id}/messages?limit=" + str(args.limit), channel_id=place
        )
        bot = await bot_id(rt.settings)
    except ToolError:
        raise
    except Exception as exc:
        raise _tool_error(exc, "read the thread") from None
    kept = [
        m
        for m in reversed(found or [])
        if (m.get("author") or {}).get("id") != bot and (up_to is None or int(m["id"]) <= up_to)
    ]
    lines = [f"{_author(m)}: {m.get('content') or ''}" for m in kept]
    # The same shape as slack.read_thread's, so a reader of one reads the other.
    return "\n".join(
        [f"Thread {place} in discord:{inp.context.channel or place}: {len(lines)} message(s)", *lines]
    )


def _by_bot(message: dict[str, Any]) -> bool:
    return bool((message.get("author") or {}).get("bot"))


def _author(message: dict[str, Any]) -> str:
    author = message.get("author") or {}
    name = author.get("global_name") or author.get("username") or "unknown"
    return f"{name} ({author.get('id', '?')})"


@native_tool(
    "discord.post_message",
    PostDiscordArgs,
    "Post a message to a Discord channel or thread of this agent.",
    permission="send_messages",
    writes=True,
    bound_argument="channel",
    bound_by=WriteBound.DISCORD_CHANNELS,
)
async def post_message(args: PostDiscordArgs, inp: ToolCallInput, rt: Runtime) -> str:
    place = args.channel or _own_place(inp)
    if place is None:
        raise ToolError(ToolErrorKind.INVALID, "channel is required: this task did not start in Discord")
    posted: list[str] = []
    try:
        place = await _channel_id(rt.settings, inp, place)
        recent = await discord_call(
            rt.settings, "GET", "/channels/{channel_id}/messages?limit=50", channel_id=place
        )
        for index, part in enumerate(split_content(args.text)):
            nonce = f"{inp.idempotency_key[-20:]}:{index}"[-25:]
            # Discord enforces the nonce for a few minutes; a later retry finds its post here.
            earlier = [m for m in recent or [] if m.get("content") == part and _by_bot(m)]
            if earlier:
                posted.append(str(earlier[0]["id"]))
                continue
            body = {"content": part, "nonce": nonce, "enforce_nonce": True, "allowed_mentions": {"parse": []}}
            message = await discord_call(
                rt.settings, "POST", "/channels/{channel_id}/messages", json=body, channel_id=place
            )
            posted.append(str(message["id"]))
    except ToolError:
        raise
    except Exception as exc:
        raise _tool_error(exc, "post the message") from None
    return f"Posted to Discord {place} ({len(posted)} message(s), first {posted[0] if posted else '-'})."
