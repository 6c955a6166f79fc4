"""While a task waits for an approval, its assistant thread (a DM) says who it waits for; once
decided, the status moves on. Against the fake Slack Web API, through the surface activities'
own functions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from activities.runtime import Runtime
from activities.slack import status as slack_status
from activities.slack import surface as slack_surface
from config.settings import Settings
from tests.fakes.slack_api import FakeSlack
from workflows.types import (
    ApprovalRequest,
    PostApprovalRequestInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
)

TOKEN = "xoxb-approval-status"
TASK = "task-slack-EvDM1"


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


@pytest.fixture
def rt(fake: FakeSlack) -> Runtime:
    return Runtime(Settings(slack_bot_token=SecretStr(TOKEN), slack_api_url=fake.base_url))


def request() -> ApprovalRequest:
    return ApprovalRequest(
        request_id=f"apr-{uuid.uuid4().hex[:8]}",
        action_id="a" * 32,
        tool="github.create_issue",
        arguments={"title": "Track the ledger decision"},
        approvers=["S0MAINTAINERS"],
        requested_at_iso="2025-01-02T10:00:00+00:00",
        expires_at_iso="2025-01-05T10:00:00+00:00",
        model="openai/gpt-4o-mini",
        estimated_cost_usd=0.01,
        approver_ids=["U_CAROL", "U_DAVE"],
    )


def asked_in(fake: FakeSlack, channel: str) -> SurfaceContext:
    ts = fake.add_message(channel, "open an issue for it", user="U_ALICE")
    return SurfaceContext("slack", channel, "U_ALICE", thread=ts, event_id="EvDM1", reply_target=ts)


async def decide(rt: Runtime, context: SurfaceContext, asked: ApprovalRequest, outcome: str) -> None:
    decided = ResolveApprovalRequestInput(
        TASK, context, asked, None, outcome, "U_CAROL", "2025-01-02T10:05:00+00:00"
    )
    await slack_surface.resolve_approval_request(decided, rt)


async def test_a_dm_shows_whose_approval_the_task_waits_for_until_decided(
    fake: FakeSlack, rt: Runtime
) -> None:
    context = asked_in(fake, "D" + uuid.uuid4().hex[:10].upper())
    asked = request()
    posted = PostApprovalRequestInput(TASK, context, asked, "dev-platform")
    await slack_surface.post_approval_request(posted, rt)
    await slack_surface.post_approval_request(posted, rt)  # a retry shows the same status
    waiting = "waiting for <@U_CAROL> or <@U_DAVE>'s approval"
    assert slack_status.waiting_for_approval(["U_CAROL", "U_DAVE"]) == waiting
    history = fake.streaming.status_history(context.channel, str(context.thread))
    assert history == [waiting, waiting]

    await decide(rt, context, asked, "approved")
    history = fake.streaming.status_history(context.channel, str(context.thread))
    assert history[-1] == slack_status.WORKING_STATUS  # no longer waiting: working on

    expired = request()
    await slack_surface.post_approval_request(PostApprovalRequestInput(TASK, context, expired, "x"), rt)
    await decide(rt, context, expired, "expired")
    assert fake.streaming.status_history(context.channel, str(context.thread))[-1] == ""  # cleared


async def test_a_channel_thread_has_no_assistant_status_to_set(fake: FakeSlack, rt: Runtime) -> None:
    context = asked_in(fake, "C" + uuid.uuid4().hex[:10].upper())
    asked = request()
    await slack_surface.post_approval_request(PostApprovalRequestInput(TASK, context, asked, "x"), rt)
    await decide(rt, context, asked, "approved")
    assert [c for c in fake.calls if c.method == "assistant.threads.setStatus"] == []
    assert fake.calls_to("chat.postMessage")  # the card and the progress message show it there
