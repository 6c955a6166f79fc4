"""What a task shows in its Slack thread: reactions, one progress message, replies, approvals.

Plain async functions called by the surface activities (`activities/surface_activities.py`), not
activities themselves. Temporal retries them, so each is idempotent: every post carries
Slack message metadata naming the task and what it is, and a retry first looks for its own
earlier post in the thread. Progress is shown with reactions on the request (working ->
done / failed) and a single progress message edited in place, never a stream of messages.

Nothing the task says is lost because a message went away: when the thread's parent was
deleted, replies and approval requests go to the channel as new top-level messages (found
again by their metadata on a retry); a deleted progress or approval message is posted again
instead of edited. An approval message that already shows a decision (after `temporal
workflow reset` re-runs a step) is never reused for a pending request.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from activities.runtime import Runtime
from activities.slack import blocks
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
from workflows.types import (
    PostApprovalRequestInput,
    PostApprovalRequestResult,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
    TaskStatus,
)

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


def _client(rt: Runtime) -> AsyncWebClient:
    try:
        return bot_client(rt.settings)
    except SlackNotConfigured as exc:
        raise not_configured_error(exc) from None


def _thread(context: SurfaceContext) -> str | None:
    return context.thread


def _request_ts(context: SurfaceContext) -> str | None:
    """The message that asked: reactions go there (the mention, else the thread root)."""
    return context.reply_target or context.thread


def _gone(exc: SlackApiError) -> bool:
    return error_code(exc) in GONE_ERRORS


async def _messages(client: AsyncWebClient, context: SurfaceContext) -> list[dict[str, Any]]:
    thread = _thread(context)
    if thread is None:
        return []
    return await thread_messages(client, context.channel, thread)


async def _where(client: AsyncWebClient, context: SurfaceContext) -> tuple[str | None, list[dict[str, Any]]]:
    """Where to post (the thread, or None for the channel when the thread is gone or there is
    none) and the messages there to look for our own earlier posts in."""
    thread = _thread(context)
    if thread is not None:
        try:
            return thread, await thread_messages(client, context.channel, thread)
        except SlackApiError as exc:
            if not _gone(exc):
                raise
            log.warning("thread %s in %s is gone; posting to the channel", thread, context.channel)
    return None, await recent_channel_messages(client, context.channel)


async def _post(
    client: AsyncWebClient, channel: str, thread: str | None, **message: Any
) -> tuple[AsyncSlackResponse, str | None]:
    """Post in `thread`; when the thread is gone, as a top-level message. Returns the
    response and where it went."""
    if thread is not None:
        try:
            return await client.chat_postMessage(channel=channel, thread_ts=thread, **message), thread
        except SlackApiError as exc:
            if not _gone(exc):
                raise
            log.warning("thread %s in %s is gone; posting to the channel", thread, channel)
    return await client.chat_postMessage(channel=channel, **message), None


async def _react(
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


async def _update_progress(
    client: AsyncWebClient,
    context: SurfaceContext,
    thread: str | None,
    messages: list[dict[str, Any]],
    task_id: str,
    status: TaskStatus,
    note: str = "",
) -> None:
    """Edit the progress message in `thread`; while the task goes on, post it again if it
    was deleted. A finished task's answer says enough, and so does one in the channel (its
    thread is gone)."""
    progress = find_posted(messages, PROGRESS_EVENT, task_id=task_id)
    text = blocks.progress_text(task_id, status, note)
    if progress is not None:
        if progress.get("text") == text:
            return
        try:
            await client.chat_update(
                channel=context.channel,
                ts=progress["ts"],
                text=text,
                metadata=metadata(PROGRESS_EVENT, task_id=task_id),
            )
            return
        except SlackApiError as exc:
            if not _gone(exc):
                raise
    if thread is None or status.finished:
        return
    await _post(
        client, context.channel, thread, text=text, metadata=metadata(PROGRESS_EVENT, task_id=task_id)
    )


async def task_started(inp: PostReplyInput, rt: Runtime) -> None:
    client = _client(rt)
    context = inp.context
    try:
        await _react(client, context, add=WORKING)
        thread, messages = await _where(client, context)
        if thread is not None and find_posted(messages, PROGRESS_EVENT, task_id=inp.task_id) is None:
            await _post(
                client,
                context.channel,
                thread,
                text=blocks.progress_text(inp.task_id),
                metadata=metadata(PROGRESS_EVENT, task_id=inp.task_id),
            )
    except SlackApiError as exc:
        raise activity_error(exc, "posting progress") from None


def _reply_key(inp: PostReplyInput) -> str:
    digest = hashlib.sha256(inp.text.encode()).hexdigest()[:16]
    return f"{inp.step}:{inp.status.value}:{digest}"


async def post_reply(inp: PostReplyInput, rt: Runtime) -> None:
    """Reply in the thread (split, as mrkdwn), then edit the progress message and reactions.
    A deleted thread does not lose the answer: it goes to the channel, top level."""
    client = _client(rt)
    context = inp.context
    key = _reply_key(inp)
    try:
        thread, messages = await _where(client, context)
        text = blocks.markdown_to_mrkdwn(inp.text)
        if thread is None and _thread(context) is not None and text.strip():
            text = f"{THREAD_GONE_NOTE}\n{text}"
        parts = blocks.split_message(text) if text.strip() else []
        for index, part in enumerate(parts):
            if find_posted(messages, REPLY_EVENT, task_id=inp.task_id, key=key, part=index):
                continue  # posted by an earlier attempt
            _, thread = await _post(
                client,
                context.channel,
                thread,
                text=part,
                metadata=metadata(REPLY_EVENT, task_id=inp.task_id, key=key, part=index),
            )
        await _update_progress(client, context, thread, messages, inp.task_id, inp.status)
        if inp.status == TaskStatus.BUDGET_EXHAUSTED:
            await _react(client, context, add=PAUSED, remove=(WORKING,))
        elif inp.status.finished:
            done = DONE if inp.status == TaskStatus.SUCCESS else FAILED
            await _react(client, context, add=done, remove=(WORKING, PAUSED))
    except SlackApiError as exc:
        raise activity_error(exc, "posting the reply") from None


def _message_ref(channel: str, ts: str) -> str:
    return f"{channel}:{ts}"


def _parse_ref(ref: str | None) -> tuple[str, str] | None:
    if not ref or ":" not in ref:
        return None
    channel, ts = ref.split(":", 1)
    return channel, ts


def pending_approval(messages: list[dict[str, Any]], request_id: str) -> dict[str, Any] | None:
    """The request's approval message that still waits for a decision. A message that shows a
    decision (its metadata has an outcome) is never reused: after `temporal workflow reset`
    the same request id is asked again, and its old message has no buttons."""
    for message in messages:
        meta = message.get("metadata") or {}
        payload = meta.get("event_payload") or {}
        if (
            meta.get("event_type") == APPROVAL_EVENT
            and payload.get("request_id") == request_id
            and not payload.get("outcome")
        ):
            return message
    return None


async def post_approval_request(inp: PostApprovalRequestInput, rt: Runtime) -> PostApprovalRequestResult:
    """Block Kit: what will run, the exact arguments, model and cost, approvers, buttons."""
    client = _client(rt)
    context = inp.context
    request = inp.request
    try:
        thread, messages = await _where(client, context)
        earlier = pending_approval(messages, request.request_id)
        if earlier is not None:
            return PostApprovalRequestResult(_message_ref(context.channel, earlier["ts"]))
        text, body = blocks.approval_request_message(inp.task_id, inp.agent_name, request)
        posted, thread = await _post(
            client,
            context.channel,
            thread,
            text=text,
            blocks=body,
            metadata=metadata(
                APPROVAL_EVENT, task_id=inp.task_id, request_id=request.request_id, agent=inp.agent_name
            ),
        )
        await _update_progress(
            client,
            context,
            thread,
            messages,
            inp.task_id,
            TaskStatus.WAITING_APPROVAL,
            f"`{request.tool}` needs a decision",
        )
        return PostApprovalRequestResult(_message_ref(str(posted["channel"]), str(posted["ts"])))
    except SlackApiError as exc:
        raise activity_error(exc, "posting the approval request") from None


async def resolve_approval_request(inp: ResolveApprovalRequestInput, rt: Runtime) -> None:
    """Show who decided and when; the buttons go away. Re-running it changes nothing more."""
    client = _client(rt)
    context = inp.context
    request = inp.request
    try:
        thread, messages = await _where(client, context)
        ref = _parse_ref(inp.message_ref)
        if ref is None:
            found = pending_approval(messages, request.request_id) or find_posted(
                messages, APPROVAL_EVENT, request_id=request.request_id
            )
            ref = (context.channel, found["ts"]) if found else None
        if ref is not None:
            agent = _agent_name(messages, inp)
            text, body = blocks.approval_resolved_message(
                inp.task_id, agent, request, inp.outcome, inp.decided_by, inp.decided_at_iso
            )
            await client.chat_update(
                channel=ref[0],
                ts=ref[1],
                text=text,
                blocks=body,
                metadata=metadata(
                    APPROVAL_EVENT,
                    task_id=inp.task_id,
                    request_id=request.request_id,
                    agent=agent,
                    outcome=inp.outcome,
                ),
            )
        if inp.outcome in ("approved", "denied"):
            await _update_progress(client, context, thread, messages, inp.task_id, TaskStatus.RUNNING)
    except SlackApiError as exc:
        if is_retryable(exc):
            raise activity_error(exc, "updating the approval request") from None
        # The message was deleted or the bot left the channel: the decision still stands.
        log.warning("could not update approval message for %s: %s", inp.task_id, error_code(exc))


def _agent_name(messages: list[dict[str, Any]], inp: ResolveApprovalRequestInput) -> str:
    """The agent's name, as recorded on the request message (it is not in the resolve input)."""
    found = find_posted(messages, APPROVAL_EVENT, request_id=inp.request.request_id)
    payload = ((found or {}).get("metadata") or {}).get("event_payload") or {}
    return str(payload.get("agent") or "The agent")
