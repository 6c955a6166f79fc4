"""Slack end to end: what a task shows in its thread, and the whole mention -> approval click
-> action -> threaded reply flow on the real dev server, real Postgres and the real worker.

Slack itself is the local fake Web API (tests/fakes/slack_api.py); slack-sdk's real client
talks to it, so reactions, the progress message, Block Kit approvals, 429s and pagination go
over Slack's wire format.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import yaml
from pydantic import SecretStr
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.runtime import Runtime
from activities.slack import surface as slack_surface
from activities.tool_errors import ToolError
from activities.tools.catalog import native
from config.settings import Settings
from surfaces.tasks import task_id_for
from tests.fakes.slack_api import BOT_USER, FakeSlack
from tests.helpers import eventually_async
from tests.integration.slack_env import click, mention, post_click, post_event, settled
from tests.integration.slack_flow_env import TOKEN, slack_setup, surfaces
from workers import worker as worker_module
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import (
    ActivityName,
    ApprovalRequest,
    MemoryScopeRef,
    ModelCallInput,
    ModelCallResult,
    ModelUsage,
    PostApprovalRequestInput,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
    TaskStatus,
    ToolCallInput,
)

CHANNEL = "C0FLOW"


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


@pytest.fixture
def rt(fake: FakeSlack) -> Runtime:
    return Runtime(Settings(slack_bot_token=SecretStr(TOKEN), slack_api_url=fake.base_url))


def thread_with_mention(fake: FakeSlack) -> tuple[str, str]:
    root = fake.add_message(CHANNEL, "We need to pick a database for the ledger.", user="U_ALICE")
    fake.add_message(CHANNEL, "Decision: Postgres 16.", user="U_BOB", thread_ts=root)
    asking = fake.add_message(CHANNEL, f"<@{BOT_USER}> capture the decision", user="U_ALICE", thread_ts=root)
    return root, asking


def context(root: str, asking: str) -> SurfaceContext:
    return SurfaceContext("slack", CHANNEL, "U_ALICE", thread=root, event_id="Ev1", reply_target=asking)


def reply_input(ctx: SurfaceContext, text: str, status: TaskStatus, step: int = 3) -> PostReplyInput:
    return PostReplyInput("task-slack-Ev1", ctx, text, status, step)


def approval(ctx: SurfaceContext) -> ApprovalRequest:
    return ApprovalRequest(
        request_id="apr-task-slack-Ev1-2-call_2",
        action_id="b" * 32,
        tool="memory.save",
        arguments={"content": "We chose Postgres 16"},
        approvers=["U_APPROVER"],
        requested_at_iso="2025-01-02T10:00:00+00:00",
        expires_at_iso="2025-01-05T10:00:00+00:00",
        model="offline/demo",
        estimated_cost_usd=0.0,
    )


def ours(fake: FakeSlack, root: str) -> list[dict[str, Any]]:
    return [m for m in fake.thread(CHANNEL, root) if m.get("bot_id")]


# The thread while a task works ---------------------------------------------------------------


async def test_start_reacts_and_posts_one_progress_message_even_when_retried(
    fake: FakeSlack, rt: Runtime
) -> None:
    root, asking = thread_with_mention(fake)
    ctx = context(root, asking)
    for _ in range(2):  # Temporal retries the activity
        await slack_surface.task_started(reply_input(ctx, "", TaskStatus.RUNNING, 0), rt)
    assert fake.reactions(CHANNEL, asking) == [slack_surface.WORKING]
    [progress] = ours(fake, root)
    assert "Working on it" in progress["text"] and "task-slack-Ev1" in progress["text"]


async def test_final_reply_is_split_converted_and_swaps_progress_and_reactions(
    fake: FakeSlack, rt: Runtime
) -> None:
    root, asking = thread_with_mention(fake)
    ctx = context(root, asking)
    await slack_surface.task_started(reply_input(ctx, "", TaskStatus.RUNNING, 0), rt)
    long_reply = "# Summary\n**Decision**: Postgres 16\n" + "\n".join(
        f"- point {i}: " + "detail " * 12 for i in range(120)
    )
    for _ in range(2):
        await slack_surface.post_reply(reply_input(ctx, long_reply, TaskStatus.SUCCESS), rt)

    progress, *parts = ours(fake, root)
    assert len(parts) >= 3 and all(len(p["text"]) <= 3900 for p in parts)
    assert parts[0]["text"].startswith("*Summary*\n*Decision*: Postgres 16\n• point 0")
    assert "\n".join(p["text"] for p in parts).count("• point") == 120  # nothing lost
    assert "Done" in progress["text"] and "edited" in progress  # edited in place
    assert len(fake.calls_to("chat.update")) == 1
    assert fake.reactions(CHANNEL, asking) == [slack_surface.DONE]


async def test_a_retry_after_a_partial_post_sends_only_the_missing_part(fake: FakeSlack, rt: Runtime) -> None:
    root, asking = thread_with_mention(fake)
    ctx = context(root, asking)
    text = "\n".join(f"line {i} " + "x" * 80 for i in range(150))
    await slack_surface.post_reply(reply_input(ctx, text, TaskStatus.SUCCESS), rt)
    parts = ours(fake, root)
    fake.delete_message(CHANNEL, parts[-1]["ts"])  # as if the attempt died before the last post
    posted_before = len(fake.calls_to("chat.postMessage"))
    await slack_surface.post_reply(reply_input(ctx, text, TaskStatus.SUCCESS), rt)
    assert len(fake.calls_to("chat.postMessage")) == posted_before + 1
    assert [p["text"] for p in ours(fake, root)] == [p["text"] for p in parts]


async def test_a_failed_task_gets_the_failed_reaction(fake: FakeSlack, rt: Runtime) -> None:
    root, asking = thread_with_mention(fake)
    ctx = context(root, asking)
    await slack_surface.task_started(reply_input(ctx, "", TaskStatus.RUNNING, 0), rt)
    await slack_surface.post_reply(reply_input(ctx, "Stopped: error — x", TaskStatus.ERROR), rt)
    assert fake.reactions(CHANNEL, asking) == [slack_surface.FAILED]


async def test_429_with_a_short_retry_after_is_waited_out(fake: FakeSlack, rt: Runtime) -> None:
    root, asking = thread_with_mention(fake)
    fake.rate_limit("chat.postMessage", times=1, retry_after=1)
    begun = time.monotonic()
    await slack_surface.post_reply(reply_input(context(root, asking), "hi", TaskStatus.SUCCESS), rt)
    assert time.monotonic() - begun >= 1.0
    statuses = [c.status for c in fake.calls if c.method == "chat.postMessage"]
    assert statuses == [429, 200]
    assert [m["text"] for m in ours(fake, root)] == ["hi"]


async def test_429_with_a_long_retry_after_goes_back_to_temporal_with_that_delay(
    fake: FakeSlack, rt: Runtime
) -> None:
    root, asking = thread_with_mention(fake)
    fake.rate_limit("chat.postMessage", times=5, retry_after=30)
    begun = time.monotonic()
    with pytest.raises(ApplicationError) as raised:
        await slack_surface.post_reply(reply_input(context(root, asking), "hi", TaskStatus.SUCCESS), rt)
    assert time.monotonic() - begun < 5  # the activity does not sleep 30 s
    assert raised.value.type == "SlackRateLimited" and not raised.value.non_retryable
    assert raised.value.next_retry_delay is not None
    assert raised.value.next_retry_delay.total_seconds() == 30


async def test_permanent_slack_errors_and_a_missing_token_are_not_retried(
    fake: FakeSlack, rt: Runtime
) -> None:
    root, asking = thread_with_mention(fake)
    fake.fail_next("conversations.replies", "not_in_channel")
    with pytest.raises(ApplicationError) as raised:
        await slack_surface.post_reply(reply_input(context(root, asking), "hi", TaskStatus.SUCCESS), rt)
    assert raised.value.non_retryable and "not_in_channel" in str(raised.value)
    no_token = Runtime(Settings(slack_api_url=fake.base_url))
    with pytest.raises(ApplicationError) as missing:
        await slack_surface.task_started(reply_input(context(root, asking), "", TaskStatus.RUNNING), no_token)
    assert missing.value.non_retryable and "SLACK_BOT_TOKEN" in str(missing.value)


# Approvals -----------------------------------------------------------------------------------


async def test_approval_request_is_posted_once_and_resolved_without_buttons(
    fake: FakeSlack, rt: Runtime
) -> None:
    root, asking = thread_with_mention(fake)
    ctx = context(root, asking)
    await slack_surface.task_started(reply_input(ctx, "", TaskStatus.RUNNING, 0), rt)
    request = approval(ctx)
    first = await slack_surface.post_approval_request(
        PostApprovalRequestInput("task-slack-Ev1", ctx, request, "dev-platform"), rt
    )
    again = await slack_surface.post_approval_request(
        PostApprovalRequestInput("task-slack-Ev1", ctx, request, "dev-platform"), rt
    )
    assert first.message_ref == again.message_ref and first.message_ref is not None
    channel, ts = first.message_ref.split(":")
    posted = next(m for m in fake.thread(CHANNEL, root) if m["ts"] == ts)
    assert channel == CHANNEL and posted["thread_ts"] == root
    assert any(b["type"] == "actions" for b in posted["blocks"])
    assert "Waiting for approval" in ours(fake, root)[0]["text"]

    for ref in (first.message_ref, None):  # with the ref, and found again by its metadata
        await slack_surface.resolve_approval_request(
            ResolveApprovalRequestInput(
                "task-slack-Ev1", ctx, request, ref, "approved", "U_APPROVER", "2025-01-02T10:05:00+00:00"
            ),
            rt,
        )
    resolved = next(m for m in fake.thread(CHANNEL, root) if m["ts"] == ts)
    assert all(b["type"] != "actions" for b in resolved["blocks"])
    assert "<@U_APPROVER>" in str(resolved["blocks"]) and "dev-platform" in str(resolved["blocks"])
    assert "Working on it" in ours(fake, root)[0]["text"]


async def test_resolving_a_deleted_approval_message_does_not_fail_the_task(
    fake: FakeSlack, rt: Runtime
) -> None:
    root, asking = thread_with_mention(fake)
    ctx = context(root, asking)
    request = approval(ctx)
    posted = await slack_surface.post_approval_request(
        PostApprovalRequestInput("task-slack-Ev1", ctx, request, "dev-platform"), rt
    )
    assert posted.message_ref is not None
    channel, ts = posted.message_ref.split(":")
    fake.delete_message(channel, ts)  # someone deleted it while the task waited
    before, updates = fake.thread(CHANNEL, root), len(fake.calls_to("chat.update"))

    for ref in (posted.message_ref, None):  # with the ref, and looked up again by its metadata
        # Returns instead of raising: the activity succeeds, so the task carries on.
        await slack_surface.resolve_approval_request(
            ResolveApprovalRequestInput(
                "task-slack-Ev1", ctx, request, ref, "expired", None, "2025-01-05T10:00:00+00:00"
            ),
            rt,
        )
    # The update was tried on the deleted message (and refused), and nothing was posted instead.
    tried = fake.calls_to("chat.update")[updates:]
    assert [(c["channel"], c["ts"]) for c in tried] == [(channel, ts)]
    assert fake.thread(CHANNEL, root) == before


# Tools -----------------------------------------------------------------------------------------


def tool_input(ctx: SurfaceContext, tool: str, key: str = "task:3:call_1", **args: object) -> ToolCallInput:
    memory = MemoryScopeRef(
        "default", "dev-platform", "channel", f"slack:{CHANNEL}", "offline/hashing-256", 90
    )
    return ToolCallInput("task-slack-Ev1", 3, "call_1", tool, dict(args), key, ctx, memory, "U_ALICE")


async def test_read_thread_reads_every_page_with_user_names(fake: FakeSlack) -> None:
    fake.page_size = 2
    fake.add_user("U_ALICE", "alice", "Alice Liddell", display_name="alice")
    fake.add_user("U_BOB", "bob", "Bob Builder")
    root, asking = thread_with_mention(fake)
    for i in range(3):
        fake.add_message(CHANNEL, f"follow-up {i}", user="U_BOB", thread_ts=root)
    rt = Runtime(Settings(slack_bot_token=SecretStr(TOKEN), slack_api_url=fake.base_url))
    handler = native("slack.read_thread").run
    assert handler is not None
    output = await handler(tool_input(context(root, asking), "slack.read_thread"), rt)
    lines = output.split("\n")
    assert lines[0] == f"Thread {root} in {CHANNEL}: 6 message(s)"
    assert lines[1] == "alice (U_ALICE): We need to pick a database for the ledger."
    assert lines[2] == "Bob Builder (U_BOB): Decision: Postgres 16."
    assert lines[-1] == "Bob Builder (U_BOB): follow-up 2"
    pages = fake.calls_to("conversations.replies")
    assert len(pages) == 3 and pages[1].get("cursor")
    assert sorted(c["user"] for c in fake.calls_to("users.info")) == ["U_ALICE", "U_BOB"]


async def test_post_message_posts_once_per_idempotency_key(fake: FakeSlack, rt: Runtime) -> None:
    root, asking = thread_with_mention(fake)
    ctx = context(root, asking)
    handler = native("slack.post_message").run
    assert handler is not None
    for _ in range(2):
        await handler(tool_input(ctx, "slack.post_message", text="**Shipped** 🎉"), rt)
    await handler(tool_input(ctx, "slack.post_message", key="task:4:call_9", text="second"), rt)
    assert [m["text"] for m in ours(fake, root)] == ["*Shipped* 🎉", "second"]

    elsewhere = await handler(tool_input(ctx, "slack.post_message", channel="C0OTHER", text="hi"), rt)
    assert "C0OTHER" in elsewhere
    assert fake.calls_to("chat.postMessage")[-1].get("thread_ts") in (None, "")


async def test_tool_errors_the_model_can_act_on(fake: FakeSlack, rt: Runtime) -> None:
    root, asking = thread_with_mention(fake)
    read = native("slack.read_thread").run
    assert read is not None
    with pytest.raises(ToolError) as not_found:
        await read(tool_input(context(root, asking), "slack.read_thread", thread_ts="1.000009"), rt)
    assert not_found.value.kind == "not_found"
    fake.fail_next("conversations.replies", "not_in_channel")
    with pytest.raises(ToolError) as denied:
        await read(tool_input(context(root, asking), "slack.read_thread"), rt)
    assert denied.value.kind == "permission"
    cli = SurfaceContext("cli", "ops", "cli:local")
    with pytest.raises(ToolError) as invalid:
        await read(tool_input(cli, "slack.read_thread"), rt)
    assert invalid.value.kind == "invalid"


# The whole flow on the real worker -------------------------------------------------------------

APPROVER = "U_APPROVER"


def flow_agent_yaml(name: str, channel: str) -> str:
    return f"""
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: {name}
spec:
  surfaces:
    slack:
      channels: [{channel}]
  tools:
    - name: slack.read_thread
      permissions: [channels:history]
    - name: memory.save
      permissions: [memory:write]
  approvals:
    require_for: [memory.save]
    approvers: [{APPROVER}]
"""


async def test_mention_approval_click_action_and_threaded_reply(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    config = yaml.safe_load(flow_agent_yaml(f"flow-{uuid.uuid4().hex[:6]}", channel))
    settings = await slack_setup(settings, fake, task_queue, config)
    fake.add_user("U_ALICE", "alice", "Alice")
    fake.add_user("U_BOB", "bob", "Bob")
    root = fake.add_message(channel, "Which database for the usage ledger?", user="U_ALICE")
    fake.add_message(channel, "Decision: we go with Postgres 16.", user="U_BOB", thread_ts=root)
    text = f"<@{BOT_USER}> summarize this thread and capture the decision"
    asking = fake.add_message(channel, text, user="U_ALICE", thread_ts=root)
    event = mention(channel, text=text, thread_ts=root)
    event["event"]["ts"] = asking
    task_id = task_id_for("slack", event["event_id"])

    def approval_message() -> dict[str, Any] | None:
        return next(
            (
                m
                for m in fake.thread(channel, root)
                if any(b["type"] == "actions" for b in m.get("blocks") or [])
            ),
            None,
        )

    async def posted() -> dict[str, Any] | None:
        return approval_message()

    async with worker_module.build_worker(client, settings), surfaces(settings, client) as http:
        assert (await post_event(http, event)).status_code == 200
        assert (await post_event(http, event, {"X-Slack-Retry-Num": "1"})).status_code == 200
        assert await settled(settings, event["event_id"]) == "started"
        message = await eventually_async(posted, "the approval card", 30.0)
        value = next(b for b in message["blocks"] if b["type"] == "actions")["elements"][0]["value"]
        assert "Postgres 16" in str(message["blocks"]) and APPROVER in str(message["blocks"])

        # Someone who may not approve: told so, privately; nothing changes.
        outsider = click(task_id, user="U_MALLORY", value=value, channel=channel)
        assert (await post_click(http, outsider)).status_code == 200
        [told] = [e for e in fake.ephemerals if e["channel"] == channel]
        assert told["user"] == "U_MALLORY" and "not allowed" in told["text"]
        handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
        assert (await handle.query(AgentTaskWorkflow.status)).pending_approval is not None
        assert approval_message() is not None  # the buttons are still there

        approver = click(task_id, user=APPROVER, value=value, channel=channel)
        assert (await post_click(http, approver)).status_code == 200
        result = await handle.result()
        assert result.status == TaskStatus.SUCCESS, result.reason

        # A click after the fact is told the request is closed.
        assert (await post_click(http, approver)).status_code == 200
        assert "already finished" in fake.ephemerals[-1]["text"]

    thread = fake.thread(channel, root)
    resolved = next(m for m in thread if m["ts"] == message["ts"])
    assert all(b["type"] != "actions" for b in resolved["blocks"])
    assert f"<@{APPROVER}>" in str(resolved["blocks"]) and "Approved" in str(resolved["blocks"])
    replies = [m for m in thread if m.get("bot_id") and "[offline model]" in m.get("text", "")]
    assert len(replies) == 1 and "Postgres 16" in replies[0]["text"]
    progress = [m for m in thread if "task `" in m.get("text", "")]
    assert len(progress) == 1 and "Done" in progress[0]["text"]
    assert fake.reactions(channel, asking) == [slack_surface.DONE]
    for method in (
        "conversations.replies",
        "users.info",
        "chat.update",
        "reactions.add",
        "reactions.remove",
        "chat.postEphemeral",
    ):
        assert fake.calls_to(method), method
    with psycopg.connect(settings.require_database_url()) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memories WHERE scope_key = %s", (f"slack:{channel}",)
        ).fetchone()
    assert row is not None and row[0] == 1
    runs = [e async for e in client.list_workflows(f"WorkflowId = '{task_id}'")]
    assert len(runs) == 1


@activity.defn(name=ActivityName.CALL_MODEL)
async def asking_model(inp: ModelCallInput) -> ModelCallResult:
    """Stand-in model: asks which release, then answers with what the user said."""
    said = [m.content for m in inp.new_messages if m.role == "user" and "U_ALICE:" in m.content]
    text = f"Checked {said[-1].split(':', 1)[1].strip()}." if said else "Which release?"
    return ModelCallResult(
        text,
        [],
        "stop",
        ModelUsage("stand-in", 10, 5, 0.0),
        inp.transcript_upto + len(inp.new_messages) + 1,
        inp.max_tokens,
    )


async def test_a_plain_reply_in_the_thread_reaches_the_task_waiting_for_the_user(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    settings = await slack_setup(
        settings,
        fake,
        task_queue,
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": f"ask-{uuid.uuid4().hex[:6]}"},
            "spec": {"surfaces": {"slack": {"channels": [channel]}}},
        },
    )
    root = fake.add_message(channel, f"<@{BOT_USER}> check the release", user="U_ALICE")
    event = mention(channel, text=f"<@{BOT_USER}> check the release")
    event["event"]["ts"] = root
    task_id = task_id_for("slack", event["event_id"])
    activities = [a for a in worker_module.ACTIVITIES if a.__name__ != "call_model"]

    def reply(text: str, **extra: Any) -> dict[str, Any]:
        payload = mention(channel, text=text, thread_ts=root, **extra)
        payload["event"]["type"] = "message"
        payload["event"]["ts"] = fake.add_message(channel, text, user="U_ALICE", thread_ts=root)
        return payload

    async with (
        worker_module.build_worker(client, settings, activities=[*activities, asking_model]),
        surfaces(settings, client) as http,
    ):
        assert (await post_event(http, event)).status_code == 200
        assert await settled(settings, event["event_id"]) == "started"
        handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)

        async def waiting_and_listed() -> bool:
            status = await handle.query(AgentTaskWorkflow.status)
            if status.status != TaskStatus.WAITING_USER:
                return False
            query = f"WorkflowId = '{task_id}' AND OpenLoopStatus = 'WAITING_USER'"
            return bool([e async for e in client.list_workflows(query)])

        await eventually_async(waiting_and_listed, "the task to wait for the user, and be listed so", 30.0)
        assert any(m.get("text") == "Which release?" for m in fake.thread(channel, root))
        elsewhere = reply("v2.3 please")
        elsewhere["event"]["thread_ts"] = "1.000001"  # another thread: not this task's
        edited = reply("v9", subtype="message_changed")
        answer = reply("v2.4 please")
        for payload in (elsewhere, edited, answer, answer):  # the last one is a redelivery
            assert (await post_event(http, payload)).status_code == 200
        result = await handle.result()
        explained = [s.summary for s in (await handle.query(AgentTaskWorkflow.explain)).steps]
    assert result.status == TaskStatus.SUCCESS
    assert result.reply == "Checked v2.4 please."
    assert sum("U_ALICE added" in s for s in explained) == 1  # one signal, not two
