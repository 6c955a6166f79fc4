"""The Discord surface's side of the surface activities (dispatched from
activities/surface_activities.py).

A task asked by a mention in a channel answers in a thread started from that message (Discord
gives the thread the message's id, so `context.thread` is known before it exists); one asked in
a thread answers there; one with no thread (a meeting summary posted to a channel) answers in
the channel. A thread that is gone does not lose the answer: it goes to the channel.

Every post is written once: an earlier attempt's message is found among the place's recent
messages by the bot, and the post carries a nonce Discord enforces. Message bodies are built by
`activities.discord.messages` (pure).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from temporalio.exceptions import ApplicationError

from activities.discord import messages
from activities.discord.client import (
    DiscordNotConfigured,
    activity_error,
    discord_call,
    error_code,
    http_status,
    not_configured_error,
)
from activities.runtime import Runtime
from config.settings import Settings
from workflows.types import (
    PostApprovalRequestInput,
    PostApprovalRequestResult,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
    TaskStatus,
)

log = logging.getLogger(__name__)

THREAD_EXISTS = 160004  # "A thread has already been created for this message"
UNKNOWN_CHANNEL, UNKNOWN_MESSAGE = 10003, 10008
RECENT = 50  # messages read back to find an earlier attempt's post
WORKING, DONE, FAILED, QUEUED = "⏳", "✅", "❌", "⏸️"
THREAD_GONE_NOTE = "-# (The thread this task answered in was deleted, so it answers here.)\n"
_BOT_IDS: dict[str, str] = {}


async def task_started(inp: PostReplyInput, rt: Runtime) -> None:
    settings, context = rt.settings, inp.context
    try:
        await _open_thread(settings, context, inp.text)
        if inp.status == TaskStatus.QUEUED:
            await _react(settings, context, QUEUED)
            await _post_once(settings, context, {"content": inp.text[: messages.MAX_CONTENT]})
            return
        await _react(settings, context, WORKING)
        await _typing(settings, context)
    except DiscordNotConfigured as exc:
        raise not_configured_error(exc) from None
    except Exception as exc:
        raise _error(exc, "telling Discord the task started") from None


async def post_reply(inp: PostReplyInput, rt: Runtime) -> None:
    settings, context = rt.settings, inp.context
    text = inp.text.strip() + messages.reply_suffix(inp.status) if inp.text.strip() else ""
    try:
        for part in messages.split_content(text):
            await _post_once(settings, context, {"content": part, "allowed_mentions": {"parse": ["users"]}})
        if inp.status.finished:
            await _react(settings, context, DONE if inp.status == TaskStatus.SUCCESS else FAILED)
    except DiscordNotConfigured as exc:
        raise not_configured_error(exc) from None
    except Exception as exc:
        raise _error(exc, "posting the reply") from None


async def post_approval_request(inp: PostApprovalRequestInput, rt: Runtime) -> PostApprovalRequestResult:
    try:
        body = messages.approval_message(inp.task_id, inp.agent_name, inp.request)
        channel, message_id = await _post_once(rt.settings, inp.context, body)
    except DiscordNotConfigured as exc:
        raise not_configured_error(exc) from None
    except ValueError as exc:  # a task id too long for a button
        raise ApplicationError(str(exc), non_retryable=True) from None
    except Exception as exc:
        raise _error(exc, "posting the approval request") from None
    return PostApprovalRequestResult(message_ref=f"{channel}:{message_id}")


async def resolve_approval_request(inp: ResolveApprovalRequestInput, rt: Runtime) -> None:
    if not inp.message_ref or ":" not in inp.message_ref:
        return
    channel, message_id = inp.message_ref.split(":", 1)
    body = messages.resolved_message(inp.request, inp.outcome, inp.decided_by)
    try:
        await discord_call(
            rt.settings,
            "PATCH",
            "/channels/{channel_id}/messages/{message_id}",
            json=body,
            channel_id=channel,
            message_id=message_id,
        )
    except DiscordNotConfigured as exc:
        raise not_configured_error(exc) from None
    except Exception as exc:
        if error_code(exc) in (UNKNOWN_CHANNEL, UNKNOWN_MESSAGE):
            log.info("approval message %s is gone; nothing to update", inp.message_ref)
            return
        raise _error(exc, "updating the approval message") from None


# Where and how --------------------------------------------------------------------------------


def _asked_in_channel(context: SurfaceContext) -> bool:
    """The mention is a channel message and the thread is to be started from it."""
    return context.thread is not None and context.thread == context.reply_target


async def _open_thread(settings: Settings, context: SurfaceContext, request: str) -> None:
    if not _asked_in_channel(context):
        return
    try:
        await discord_call(
            settings,
            "POST",
            "/channels/{channel_id}/messages/{message_id}/threads",
            json={"name": messages.thread_name(request), "auto_archive_duration": 1440},
            channel_id=context.channel,
            message_id=context.reply_target,
        )
    except Exception as exc:
        if error_code(exc) == THREAD_EXISTS:
            return  # an earlier attempt started it
        if error_code(exc) in (UNKNOWN_MESSAGE, UNKNOWN_CHANNEL):
            log.info("the message %s is gone: the task answers in the channel", context.reply_target)
            return
        raise


async def _post_once(settings: Settings, context: SurfaceContext, body: dict[str, Any]) -> tuple[str, str]:
    """Post `body` where the task answers unless an earlier attempt did; (channel, message id)."""
    place = context.thread or context.channel
    try:
        return place, await _post_in(settings, place, body)
    except Exception as exc:
        if place == context.channel or error_code(exc) != UNKNOWN_CHANNEL:
            raise
    moved = {**body, "content": THREAD_GONE_NOTE + str(body.get("content") or "")}
    return context.channel, await _post_in(settings, context.channel, moved)


async def _post_in(settings: Settings, place: str, body: dict[str, Any]) -> str:
    bot = await bot_id(settings)
    recent = await discord_call(
        settings, "GET", "/channels/{channel_id}/messages?limit=" + str(RECENT), channel_id=place
    )
    for message in recent or []:
        if (message.get("author") or {}).get("id") == bot and _same(message, body):
            return str(message["id"])  # posted by an earlier attempt
    digest = hashlib.sha256(repr(sorted(body.items())).encode()).hexdigest()[:25]
    posted = await discord_call(
        settings,
        "POST",
        "/channels/{channel_id}/messages",
        json={**body, "nonce": digest, "enforce_nonce": True},
        channel_id=place,
    )
    return str(posted["id"])


def _same(message: dict[str, Any], body: dict[str, Any]) -> bool:
    if message.get("content") != body.get("content"):
        return False
    wanted = [e.get("footer", {}).get("text") for e in body.get("embeds") or []]
    found = [(e.get("footer") or {}).get("text") for e in message.get("embeds") or []]
    return wanted == found


async def bot_id(settings: Settings) -> str:
    token = settings.discord_bot_token.get_secret_value() if settings.discord_bot_token else ""
    if token not in _BOT_IDS:
        me = await discord_call(settings, "GET", "/users/@me")
        _BOT_IDS[token] = str(me["id"])
    return _BOT_IDS[token]


async def _react(settings: Settings, context: SurfaceContext, emoji: str) -> None:
    """A reaction on the message that asked (cosmetic: a failure is logged, never raised)."""
    if context.reply_target is None:
        return
    place = context.channel if _asked_in_channel(context) else (context.thread or context.channel)
    try:
        await discord_call(
            settings,
            "PUT",
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me",
            channel_id=place,
            message_id=context.reply_target,
            emoji=emoji,
        )
    except DiscordNotConfigured:
        raise
    except Exception as exc:
        log.info("reaction %s on %s failed: %s", emoji, context.reply_target, exc)


async def _typing(settings: Settings, context: SurfaceContext) -> None:
    try:
        await discord_call(
            settings, "POST", "/channels/{channel_id}/typing", channel_id=context.thread or context.channel
        )
    except DiscordNotConfigured:
        raise
    except Exception as exc:  # cosmetic
        log.info("typing in %s failed: %s", context.thread or context.channel, exc)


def _error(exc: Exception, doing: str) -> Exception:
    if isinstance(exc, ApplicationError):
        return exc
    if http_status(exc) is None and not type(exc).__module__.startswith(("discord", "aiohttp")):
        return exc
    return activity_error(exc, doing)
