"""Opt-in: the Slack surface against real Slack.

Runs only with SLACK_LIVE_BOT_TOKEN (a bot token with chat:write, channels:history,
reactions:write, users:read) and SLACK_LIVE_CHANNEL (a channel id the bot is in). It posts
a thread, then drives the same functions a task uses — progress, approval request and its
resolution, the reply, both Slack tools — and checks the thread through the Web API. It
deletes what it posted.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from activities.runtime import Runtime
from activities.slack import surface as slack_surface
from activities.slack.client import bot_client, thread_messages
from activities.tools.catalog import native
from config.settings import Settings
from workflows.types import (
    ApprovalRequest,
    MemoryScopeRef,
    PostApprovalRequestInput,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
    TaskStatus,
    ToolCallInput,
)

TOKEN = os.environ.get("SLACK_LIVE_BOT_TOKEN")
CHANNEL = os.environ.get("SLACK_LIVE_CHANNEL")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (TOKEN and CHANNEL), reason="set SLACK_LIVE_BOT_TOKEN and SLACK_LIVE_CHANNEL to run"
    ),
]


@pytest.fixture
def rt() -> Runtime:
    return Runtime(
        Settings(
            slack_bot_token=SecretStr(TOKEN or ""),
            slack_api_url=os.environ.get("OPENLOOP_SLACK_API_URL", "https://slack.com/api/"),
        )
    )


@pytest.fixture
async def thread(rt: Runtime) -> AsyncIterator[str]:
    assert CHANNEL is not None
    client = bot_client(rt.settings)
    root = await client.chat_postMessage(channel=CHANNEL, text="OpenLoop live test: ignore me")
    yield str(root["ts"])
    for message in reversed(await thread_messages(client, CHANNEL, str(root["ts"]))):
        await client.chat_delete(channel=CHANNEL, ts=message["ts"])


async def test_a_task_thread_on_real_slack(rt: Runtime, thread: str) -> None:
    assert CHANNEL is not None
    task_id = f"task-slack-live-{uuid.uuid4().hex[:8]}"
    ctx = SurfaceContext("slack", CHANNEL, "U_LIVE", thread=thread, event_id="EvLive", reply_target=thread)
    await slack_surface.task_started(PostReplyInput(task_id, ctx, "", TaskStatus.RUNNING, 0), rt)
    request = ApprovalRequest(
        "apr-live-1",
        "c" * 32,
        "memory.save",
        {"content": "live test"},
        ["U_NOBODY"],
        "2025-01-01T00:00:00+00:00",
        "2099-01-01T00:00:00+00:00",
        "offline/demo",
        0.0,
    )
    posted = await slack_surface.post_approval_request(
        PostApprovalRequestInput(task_id, ctx, request, "live-agent"), rt
    )
    assert posted.message_ref and posted.message_ref.startswith(f"{CHANNEL}:")
    await slack_surface.resolve_approval_request(
        ResolveApprovalRequestInput(
            task_id, ctx, request, posted.message_ref, "denied", "U_NOBODY", "2025-01-01T00:01:00+00:00"
        ),
        rt,
    )
    reply = "**Done.** " + "word " * 1200  # over one message
    for _ in range(2):  # a retried activity posts once
        await slack_surface.post_reply(PostReplyInput(task_id, ctx, reply, TaskStatus.SUCCESS, 2), rt)

    memory = MemoryScopeRef("default", "live", "channel", "slack:live", "offline/hashing-256", 1)
    tool = ToolCallInput(
        task_id,
        3,
        "call_1",
        "slack.post_message",
        {"text": "tool post"},
        f"{task_id}:3:call_1",
        ctx,
        memory,
        "U_LIVE",
    )
    post = native("slack.post_message").run
    read = native("slack.read_thread").run
    assert post is not None and read is not None
    for _ in range(2):
        await post(tool, rt)
    output = await read(
        ToolCallInput(task_id, 4, "call_2", "slack.read_thread", {}, "k", ctx, memory, "U_LIVE"), rt
    )
    assert "tool post" in output and "OpenLoop live test" in output

    messages = await thread_messages(bot_client(rt.settings), CHANNEL, thread)
    texts = [m.get("text", "") for m in messages]
    assert sum(t.startswith("*Done.*") for t in texts) == 1
    assert sum(t == "tool post" for t in texts) == 1
    approval: dict[str, Any] = next(m for m in messages if m["ts"] == posted.message_ref.split(":")[1])
    assert all(b["type"] != "actions" for b in approval.get("blocks") or [])
