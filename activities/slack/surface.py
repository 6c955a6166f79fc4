"""What a task shows in its Slack thread: reactions, one progress message, replies, approvals.

Plain async functions called by the surface activities (`activities/surface_activities.py`), not
activities themselves. Temporal retries them, so each is idempotent: every post carries
Slack message metadata naming the task and what it is, and a retry first looks for its own
earlier post in the thread. Progress is shown with reactions on the request (working ->
done / failed) and a single progress message edited in place, never a stream of messages.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

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


async def _messages(client: AsyncWebClient, context: SurfaceContext) -> list[dict[str, Any]]:
    thread = _thread(context)
    if thread is None:
        return []
    return await thread_messages(client, context.channel, thread)


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
    messages: list[dict[str, Any]],
    task_id: str,
    status: TaskStatus,
    note: str = "",
) -> None:
    progress = find_posted(messages, PROGRESS_EVENT, task_id=task_id)
    if progress is None:
        return
    text = blocks.progress_text(task_id, status, note)
    if progress.get("text") == text:
        return
    await client.chat_update(
        channel=context.channel,
        ts=progress["ts"],
        text=text,
        metadata=metadata(PROGRESS_EVENT, task_id=task_id),
    )


async def task_started(inp: PostReplyInput, rt: Runtime) -> None:
    client = _client(rt)
    context = inp.context
    try:
        await _react(client, context, add=WORKING)
        messages = await _messages(client, context)
        if find_posted(messages, PROGRESS_EVENT, task_id=inp.task_id) is None:
            await client.chat_postMessage(
                channel=context.channel,
                thread_ts=_thread(context),
                text=blocks.progress_text(inp.task_id),
                metadata=metadata(PROGRESS_EVENT, task_id=inp.task_id),
            )
    except SlackApiError as exc:
        raise activity_error(exc, "posting progress") from None


def _reply_key(inp: PostReplyInput) -> str:
    digest = hashlib.sha256(inp.text.encode()).hexdigest()[:16]
    return f"{inp.step}:{inp.status.value}:{digest}"


async def post_reply(inp: PostReplyInput, rt: Runtime) -> None:
    """Reply in the thread (split, as mrkdwn), then edit the progress message and reactions."""
    client = _client(rt)
    context = inp.context
    key = _reply_key(inp)
    try:
        messages = await _messages(client, context)
        text = blocks.markdown_to_mrkdwn(inp.text)
        parts = blocks.split_message(text) if text.strip() else []
        for index, part in enumerate(parts):
            if find_posted(messages, REPLY_EVENT, task_id=inp.task_id, key=key, part=index):
                continue  # posted by an earlier attempt
            await client.chat_postMessage(
                channel=context.channel,
                thread_ts=_thread(context),
                text=part,
                metadata=metadata(REPLY_EVENT, task_id=inp.task_id, key=key, part=index),
            )
        await _update_progress(client, context, messages, inp.task_id, inp.status)
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


async def post_approval_request(inp: PostApprovalRequestInput, rt: Runtime) -> PostApprovalRequestResult:
    """Block Kit: what will run, the exact arguments, model and cost, approvers, buttons."""
    client = _client(rt)
    context = inp.context
    request = inp.request
    try:
        messages = await _messages(client, context)
        earlier = find_posted(messages, APPROVAL_EVENT, request_id=request.request_id)
        if earlier is not None:
            return PostApprovalRequestResult(_message_ref(context.channel, earlier["ts"]))
        text, body = blocks.approval_request_message(inp.task_id, inp.agent_name, request)
        posted = await client.chat_postMessage(
            channel=context.channel,
            thread_ts=_thread(context),
            text=text,
            blocks=body,
            metadata=metadata(
                APPROVAL_EVENT, task_id=inp.task_id, request_id=request.request_id, agent=inp.agent_name
            ),
        )
        await _update_progress(
            client,
            context,
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
        messages = await _messages(client, context)
        ref = _parse_ref(inp.message_ref)
        if ref is None:
            found = find_posted(messages, APPROVAL_EVENT, request_id=request.request_id)
            ref = (context.channel, found["ts"]) if found else None
        if ref is not None:
            text, body = blocks.approval_resolved_message(
                inp.task_id,
                _agent_name(messages, inp),
                request,
                inp.outcome,
                inp.decided_by,
                inp.decided_at_iso,
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
                    agent=_agent_name(messages, inp),
                    outcome=inp.outcome,
                ),
            )
        if inp.outcome in ("approved", "denied"):
            await _update_progress(client, context, messages, inp.task_id, TaskStatus.RUNNING)
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
