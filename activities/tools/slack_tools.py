"""Slack tools an agent may call: `slack.read_thread` and `slack.post_message`.

Both default to the task's own Slack channel and thread. Posting is idempotent per the tool
call's idempotency key (kept in Slack message metadata), so a retried activity posts once.
Slack error codes the model can act on come back as `ToolError`; transient ones are retried.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
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
    recent_channel_messages,
    thread_messages,
)
from activities.slack.surface import APPROVAL_EVENT, PROGRESS_EVENT
from activities.tool_errors import ToolError, ToolErrorKind
from activities.tools.native import NonEmpty, ToolArgs, native_tool
from workflows.tool_catalog import WriteBound
from workflows.types import ToolCallInput

TOOL_POST_EVENT = "openloop_tool_post"
_NOT_FOUND = {"channel_not_found", "thread_not_found", "message_not_found", "user_not_found"}
_PERMISSION = {
    "not_in_channel",
    "missing_scope",
    "is_archived",
    "restricted_action",
    "channel_is_archived",
    "not_authed",
    "invalid_auth",
    "account_inactive",
}
_OUR_STATUS_EVENTS = {PROGRESS_EVENT, APPROVAL_EVENT}


def _client(rt: Runtime) -> AsyncWebClient:
    try:
        return bot_client(rt.settings)
    except SlackNotConfigured as exc:
        raise ToolError(ToolErrorKind.FAILED, str(exc)) from None


def _tool_error(exc: SlackApiError, doing: str) -> Exception:
    if is_retryable(exc):
        return activity_error(exc, doing)
    code = error_code(exc)
    kind = (
        ToolErrorKind.NOT_FOUND
        if code in _NOT_FOUND
        else ToolErrorKind.PERMISSION
        if code in _PERMISSION
        else ToolErrorKind.FAILED
    )
    return ToolError(kind, f"Slack could not {doing}: {code}")


class ReadThreadArgs(ToolArgs):
    channel: NonEmpty | None = Field(default=None, description="defaults to the task's channel")
    thread_ts: NonEmpty | None = Field(default=None, description="defaults to the task's thread")


class PostMessageArgs(ToolArgs):
    channel: NonEmpty | None = Field(default=None, description="defaults to the task's channel")
    text: NonEmpty
    thread_ts: NonEmpty | None = None


async def _user_names(client: AsyncWebClient, messages: list[dict[str, Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for user in dict.fromkeys(m["user"] for m in messages if m.get("user")):
        try:
            info = (await client.users_info(user=user)).get("user") or {}
        except SlackApiError as exc:
            if is_retryable(exc):
                raise activity_error(exc, "looking up a user") from None
            names[user] = user  # a deleted or foreign user: the id is still meaningful
            continue
        profile = info.get("profile") or {}
        names[user] = (
            profile.get("display_name")
            or profile.get("real_name")
            or info.get("real_name")
            or info.get("name")
            or user
        )
    return names


def _author(message: dict[str, Any], names: dict[str, str]) -> str:
    if message.get("user"):
        return f"{names.get(message['user'], message['user'])} ({message['user']})"
    bot = message.get("bot_profile") or {}
    return str(bot.get("name") or message.get("username") or message.get("bot_id") or "unknown")


@native_tool(
    "slack.read_thread",
    ReadThreadArgs,
    "Read every message of the current Slack thread, with user names.",
    permission="channels:history",
    writes=False,
)
async def read_thread(args: ReadThreadArgs, inp: ToolCallInput, rt: Runtime) -> str:
    own_slack = inp.context.surface == "slack"
    channel = args.channel or (inp.context.channel if own_slack else None)
    thread = args.thread_ts or (inp.context.thread if own_slack else None)
    if not channel or not thread:
        raise ToolError(
            ToolErrorKind.INVALID, "give channel and thread_ts: this task did not start in a Slack thread"
        )
    client = _client(rt)
    try:
        messages = await thread_messages(client, channel, thread)
        names = await _user_names(client, messages)
    except SlackApiError as exc:
        raise _tool_error(exc, "read the thread") from None
    lines = [
        f"{_author(m, names)}: {m.get('text') or ''}"
        for m in messages
        if ((m.get("metadata") or {}).get("event_type")) not in _OUR_STATUS_EVENTS
    ]
    header = f"Thread {thread} in {channel}: {len(lines)} message(s)"
    return "\n".join([header, *lines])


@native_tool(
    "slack.post_message",
    PostMessageArgs,
    "Post a message to a Slack channel or thread.",
    permission="chat:write",
    writes=True,
    bound_argument="channel",
    bound_by=WriteBound.SLACK_CHANNELS,
)
async def post_message(args: PostMessageArgs, inp: ToolCallInput, rt: Runtime) -> str:
    text = args.text
    own_slack = inp.context.surface == "slack"
    channel = args.channel or (inp.context.channel if own_slack else None)
    if channel is None:
        raise ToolError(ToolErrorKind.INVALID, "channel is required: this task did not start in Slack")
    thread = args.thread_ts
    if thread is None and own_slack and channel == inp.context.channel:
        thread = inp.context.thread  # "post here" means the task's own thread
    client = _client(rt)
    parts = blocks.split_message(blocks.markdown_to_mrkdwn(text))
    try:
        if thread:
            earlier = await thread_messages(client, channel, thread)
        else:
            earlier = await recent_channel_messages(client, channel)
        first_ts: str | None = None
        for index, part in enumerate(parts):
            found = find_posted(earlier, TOOL_POST_EVENT, key=inp.idempotency_key, part=index)
            if found is None:
                posted = await client.chat_postMessage(
                    channel=channel,
                    thread_ts=thread,
                    text=part,
                    metadata=metadata(
                        TOOL_POST_EVENT, task_id=inp.task_id, key=inp.idempotency_key, part=index
                    ),
                )
                found = {"ts": posted["ts"]}
            first_ts = first_ts or str(found["ts"])
    except SlackApiError as exc:
        raise _tool_error(exc, "post the message") from None
    where = f"thread {thread} in {channel}" if thread else channel
    return f"Posted to {where} (ts {first_ts}, {len(parts)} message(s))."
