"""Opt-in: the Discord surface against real Discord.

Runs only with DISCORD_LIVE_BOT_TOKEN (a bot in a test server with View Channel, Send Messages,
Create Public Threads, Send Messages in Threads, Read Message History and Add Reactions) and
DISCORD_LIVE_CHANNEL (a text channel id there). The bot posts a message as the "mention", then
the test drives the same functions a task uses — the first sign (a thread started from that
message), the approval message and its resolution, a reply over Discord's 2,000 characters
posted twice (as a retried activity would), both Discord tools — and checks the thread through
the REST API. It deletes the thread and the message at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from activities.discord import surface as discord_surface
from activities.discord.client import discord_call
from activities.runtime import Runtime
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

TOKEN = os.environ.get("DISCORD_LIVE_BOT_TOKEN")
CHANNEL = os.environ.get("DISCORD_LIVE_CHANNEL")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (TOKEN and CHANNEL), reason="set DISCORD_LIVE_BOT_TOKEN and DISCORD_LIVE_CHANNEL to run"
    ),
]


@pytest.fixture
def rt() -> Runtime:
    return Runtime(
        Settings(
            discord_bot_token=SecretStr(TOKEN or ""),
            discord_api_url=os.environ.get("OPENLOOP_DISCORD_API_URL", "https://discord.com/api/v10"),
        )
    )


@pytest.fixture
async def asked(rt: Runtime) -> AsyncIterator[str]:
    """A message standing for the mention; the thread started from it has its id."""
    message = await discord_call(
        rt.settings,
        "POST",
        "/channels/{channel_id}/messages",
        json={"content": "OpenLoop live test: ignore me"},
        channel_id=CHANNEL,
    )
    yield str(message["id"])
    for path in ("/channels/{channel_id}",):  # the thread (if started) goes with its messages
        try:
            await discord_call(rt.settings, "DELETE", path, channel_id=str(message["id"]))
        except Exception:  # noqa: BLE001 - no thread was started
            pass
    await discord_call(
        rt.settings,
        "DELETE",
        "/channels/{channel_id}/messages/{message_id}",
        channel_id=CHANNEL,
        message_id=message["id"],
    )


async def test_a_task_thread_on_real_discord(rt: Runtime, asked: str) -> None:
    assert CHANNEL is not None
    task_id = f"task-discord-live-{uuid.uuid4().hex[:8]}"
    ctx = SurfaceContext("discord", CHANNEL, "discord:0", thread=asked, event_id=asked, reply_target=asked)
    await discord_surface.task_started(PostReplyInput(task_id, ctx, "live test", TaskStatus.RUNNING, 0), rt)
    await discord_surface.task_started(PostReplyInput(task_id, ctx, "live test", TaskStatus.RUNNING, 0), rt)
    request = ApprovalRequest(
        "apr-live-1",
        "c" * 32,
        "memory.save",
        {"content": "live test"},
        ["discord:0"],
        "2025-01-01T00:00:00+00:00",
        "2099-01-01T00:00:00+00:00",
        "offline/demo",
        0.0,
    )
    posted = await discord_surface.post_approval_request(
        PostApprovalRequestInput(task_id, ctx, request, "live-agent"), rt
    )
    assert posted.message_ref and posted.message_ref.startswith(f"{asked}:")
    await discord_surface.resolve_approval_request(
        ResolveApprovalRequestInput(
            task_id, ctx, request, posted.message_ref, "denied", "discord:0", "2025-01-01T00:01:00+00:00"
        ),
        rt,
    )
    reply = "**Done.** " + "word " * 900  # over one message
    for _ in range(2):  # a retried activity posts once
        await discord_surface.post_reply(PostReplyInput(task_id, ctx, reply, TaskStatus.SUCCESS, 2), rt)

    memory = MemoryScopeRef("default", "live", "channel", f"discord:{CHANNEL}", "offline/hashing-256", 1)
    post = native("discord.post_message").run
    read = native("discord.read_thread").run
    assert post is not None and read is not None
    tool = ToolCallInput(
        task_id,
        3,
        "call_1",
        "discord.post_message",
        {"text": "tool post"},
        f"{task_id}:3:call_1",
        ctx,
        memory,
        "U",
    )
    for _ in range(2):
        await post(tool, rt)
    in_thread = SurfaceContext("discord", CHANNEL, "discord:0", thread=asked, event_id="x", reply_target="x")
    output = await read(
        ToolCallInput(task_id, 4, "call_2", "discord.read_thread", {}, "k", in_thread, memory, "U"), rt
    )
    assert output.startswith(f"Thread {asked} in discord:{CHANNEL}:")

    messages = await discord_call(
        rt.settings, "GET", "/channels/{channel_id}/messages?limit=50", channel_id=asked
    )
    texts = [m["content"] for m in messages]
    assert sum(t.startswith("**Done.**") for t in texts) == 1
    assert texts.count("tool post") == 1
    approval = next(m for m in messages if m["id"] == posted.message_ref.split(":")[1])
    assert approval["components"] == [] and "Denied" in approval["content"]
