"""The Slack calls the task's posts are built from: where to post (its thread, or the channel
when the thread is gone), posting, swapping reactions on the request and editing the single
progress message. The reaction names and metadata event types live here too.

Used by `activities.slack.surface`, which re-exports the constants its callers import.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from activities.runtime import Runtime
from activities.slack import blocks, status
from activities.slack.client import (
    SlackNotConfigured,
    activity_error,
    bot_client,
    error_code,
    find_posted,
    is_retryable,
    metadata,
    not_configured_error,
    recent_channel_messages,
    thread_messages,
)
from workflows.types import SurfaceContext, TaskStatus

log = logging.getLogger(__name__)

WORKING = "hourglass_flowing_sand"
PAUSED = "double_vertical_bar"
DONE = "white_check_mark"
FAILED = "x"

PROGRESS_EVENT = "openloop_progress"
REPLY_EVENT = "openloop_reply"
APPROVAL_EVENT = "openloop_approval"

# Errors that mean "already in the state we wanted": not failures.
_HARMLESS_REACTION_ERRORS = {"already_reacted", "no_reaction", "message_not_found"}
# Errors that mean the thread (its parent message) or the message to edit is gone.
GONE_ERRORS = frozenset({"thread_not_found", "message_not_found"})
THREAD_GONE_NOTE = "_(The thread this task answered in was deleted, so it answers here.)_"


def client_for(rt: Runtime) -> AsyncWebClient:
    try:
        return bot_client(rt.settings)
    except SlackNotConfigured as exc:
        raise not_configured_error(exc) from None


def thread_of(context: SurfaceContext) -> str | None:
    return context.thread


def _request_ts(context: SurfaceContext) -> str | None:
    """The message that asked: reactions go there (the mention, else the thread root)."""
    return context.reply_target or context.thread


def gone(exc: SlackApiError) -> bool:
    return error_code(exc) in GONE_ERRORS


async def _messages(client: AsyncWebClient, context: SurfaceContext) -> list[dict[str, Any]]:
    thread = thread_of(context)
    if thread is None:
        return []
    return await thread_messages(client, context.channel, thread)


async def where(client: AsyncWebClient, context: SurfaceContext) -> tuple[str | None, list[dict[str, Any]]]:
    """Where to post (the thread, or None for the channel when the thread is gone or there is
    none) and the messages there to look for our own earlier posts in."""
    thread = thread_of(context)
    if thread is not None:
        try:
            return thread, await thread_messages(client, context.channel, thread)
        except SlackApiError as exc:
            if not gone(exc):
                raise
            log.warning("thread %s in %s is gone; posting to the channel", thread, context.channel)
    return None, await recent_channel_messages(client, context.channel)


async def post(
    client: AsyncWebClient, channel: str, thread: str | None, **message: Any
) -> tuple[AsyncSlackResponse, str | None]:
    """Post in `thread`; when the thread is gone, as a top-level message. Returns the
    response and where it went."""
    if thread is not None:
        try:
            return await client.chat_postMessage(channel=channel, thread_ts=thread, **message), thread
        except SlackApiError as exc:
            if not gone(exc):
                raise
            log.warning("thread %s in %s is gone; posting to the channel", thread, channel)
    return await client.chat_postMessage(channel=channel, **message), None


async def react(
    client: AsyncWebClient, context: SurfaceContext, add: str | None, remove: tuple[str, ...] = ()
) -> None:
    """Swap reactions on the request. Cosmetic: only transient errors are worth a retry."""
    target = _request_ts(context)
    if target is None:
        return
    changes = [(False, name) for name in remove] + ([(True, add)] if add is not None else [])
    for adding, name in changes:
        call = client.reactions_add if adding else client.reactions_remove
        try:
            await call(channel=context.channel, timestamp=target, name=name)
        except SlackApiError as exc:
            if is_retryable(exc):
                raise activity_error(exc, "reaction") from None
            if error_code(exc) not in _HARMLESS_REACTION_ERRORS:
                log.warning("slack reaction %s failed: %s", name, error_code(exc))


async def update_progress(
    client: AsyncWebClient,
    context: SurfaceContext,
    thread: str | None,
    messages: list[dict[str, Any]],
    task_id: str,
    task_status: TaskStatus,
    note: str = "",
) -> None:
    """Edit the progress message in `thread`; while the task goes on, post it again if it
    was deleted. A finished task's answer says enough, and so does one in the channel (its
    thread is gone)."""
    progress = find_posted(messages, PROGRESS_EVENT, task_id=task_id)
    text = blocks.progress_text(task_id, task_status, note)
    # A Stop button while the task runs (`activities.slack.status`); none once it ended.
    shown = status.progress_blocks(text, task_id, running=not task_status.finished)
    if progress is not None:
        if progress.get("text") == text:
            return
        try:
            await client.chat_update(
                channel=context.channel,
                ts=progress["ts"],
                text=text,
                blocks=shown,
                metadata=metadata(PROGRESS_EVENT, task_id=task_id),
            )
            return
        except SlackApiError as exc:
            if not gone(exc):
                raise
    if thread is None or task_status.finished:
        return
    await post(
        client,
        context.channel,
        thread,
        text=text,
        blocks=shown,
        metadata=metadata(PROGRESS_EVENT, task_id=task_id),
    )
