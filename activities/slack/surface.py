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

The Slack calls they are built from (where to post, posting, reactions, the progress
message) are in `activities.slack.posting`.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from slack_sdk.errors import SlackApiError

from activities.runtime import Runtime
from activities.slack import blocks, status, streaming
from activities.slack.client import activity_error, error_code, find_posted, is_retryable, metadata
from activities.slack.posting import (
    APPROVAL_EVENT,
    DONE,
    FAILED,
    GONE_ERRORS,
    PAUSED,
    PROGRESS_EVENT,
    REPLY_EVENT,
    THREAD_GONE_NOTE,
    WORKING,
    client_for,
    post,
    react,
    thread_of,
    update_progress,
    where,
)
from workflows.types import (
    PostApprovalRequestInput,
    PostApprovalRequestResult,
    PostReplyInput,
    ResolveApprovalRequestInput,
    TaskStatus,
)

__all__ = [
    "APPROVAL_EVENT",
    "DONE",
    "FAILED",
    "GONE_ERRORS",
    "PAUSED",
    "PROGRESS_EVENT",
    "REPLY_EVENT",
    "THREAD_GONE_NOTE",
    "WORKING",
    "pending_approval",
    "post_approval_request",
    "post_reply",
    "resolve_approval_request",
    "task_started",
]

log = logging.getLogger(__name__)


QUEUED_EVENT = "openloop_queued"


async def _say_queued(client: Any, inp: PostReplyInput) -> None:
    """A task waiting under its agent's task limits says so once, in the thread."""
    context = inp.context
    await react(client, context, add=PAUSED)
    thread, messages = await where(client, context)
    if thread is not None and find_posted(messages, QUEUED_EVENT, task_id=inp.task_id) is None:
        await post(
            client,
            context.channel,
            thread,
            text=inp.text,
            metadata=metadata(QUEUED_EVENT, task_id=inp.task_id),
        )


async def task_started(inp: PostReplyInput, rt: Runtime) -> None:
    client = client_for(rt)
    context = inp.context
    try:
        if inp.status == TaskStatus.QUEUED:
            await _say_queued(client, inp)
            return
        await react(client, context, add=WORKING, remove=(PAUSED,))
        if await status.set_status(client, context, status.WORKING_STATUS):
            return  # an assistant thread shows the status; no progress message needed
        thread, messages = await where(client, context)
        if thread is not None and find_posted(messages, PROGRESS_EVENT, task_id=inp.task_id) is None:
            text = blocks.progress_text(inp.task_id)
            await post(
                client,
                context.channel,
                thread,
                text=text,
                blocks=status.progress_blocks(text, inp.task_id, running=True),
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
    client = client_for(rt)
    context = inp.context
    key = _reply_key(inp)
    try:
        thread, messages = await where(client, context)
        text = blocks.markdown_to_mrkdwn(inp.text)
        if thread is None and thread_of(context) is not None and text.strip():
            text = f"{THREAD_GONE_NOTE}\n{text}"
        parts = blocks.split_message(text) if text.strip() else []
        for index, part in enumerate(parts):
            if find_posted(messages, REPLY_EVENT, task_id=inp.task_id, key=key, part=index):
                continue  # posted by an earlier attempt
            tagged = metadata(REPLY_EVENT, task_id=inp.task_id, key=key, part=index)
            if index == 0 and await streaming.replace_streamed(
                client, context.channel, inp.streamed, part, tagged
            ):
                continue  # the streamed answer now reads as the final text
            _, thread = await post(
                client,
                context.channel,
                thread,
                text=part,
                metadata=metadata(REPLY_EVENT, task_id=inp.task_id, key=key, part=index),
            )
        await update_progress(client, context, thread, messages, inp.task_id, inp.status)
        if inp.status.finished or inp.status == TaskStatus.WAITING_USER:
            await status.set_status(client, context, "")  # the answer is out: clear the status
        if inp.status == TaskStatus.BUDGET_EXHAUSTED:
            await react(client, context, add=PAUSED, remove=(WORKING,))
        elif inp.status.finished:
            done = DONE if inp.status == TaskStatus.SUCCESS else FAILED
            await react(client, context, add=done, remove=(WORKING, PAUSED))
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
    client = client_for(rt)
    context = inp.context
    request = inp.request
    try:
        thread, messages = await where(client, context)
        # In an assistant thread (a DM) the status says who the task waits for, until decided.
        await status.set_status(client, context, status.waiting_for_approval(request.approver_ids or []))
        earlier = pending_approval(messages, request.request_id)
        if earlier is not None:
            return PostApprovalRequestResult(_message_ref(context.channel, earlier["ts"]))
        text, body = blocks.approval_request_message(inp.task_id, inp.agent_name, request)
        posted, thread = await post(
            client,
            context.channel,
            thread,
            text=text,
            blocks=body,
            metadata=metadata(
                APPROVAL_EVENT, task_id=inp.task_id, request_id=request.request_id, agent=inp.agent_name
            ),
        )
        await update_progress(
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
    client = client_for(rt)
    context = inp.context
    request = inp.request
    # Decided: in an assistant thread the status says the task works on (or, ended, clears).
    working = inp.outcome in ("approved", "denied")
    await status.set_status(client, context, status.WORKING_STATUS if working else "")
    try:
        thread, messages = await where(client, context)
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
            await update_progress(client, context, thread, messages, inp.task_id, TaskStatus.RUNNING)
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
