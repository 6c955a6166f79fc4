"""Slack's HTTP endpoints on the real surfaces app, real Temporal dev server and Postgres.

Requests are signed exactly as Slack signs them (slack-sdk's SignatureVerifier) and posted to
`/slack/events` and `/slack/interactivity`; follow-up replies go through slack-sdk to the
local fake Slack Web API. No worker runs here, so started tasks wait on their queue.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from temporalio.client import Client, WorkflowExecutionStatus

from activities import runtime as activity_runtime
from activities.store.agents import StoredAgent, apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.app import create_app
from surfaces.tasks import task_id_for
from tests.fakes.slack_api import BOT_ID, BOT_USER, FakeSlack
from tests.helpers import eventually_async
from tests.integration.slack_env import (
    SECRET,
    TOKEN,
    click,
    mention,
    new_channel,
    post_click,
    post_event,
    settled,
    signed,
    started_input,
    terminate,
)

ACK_BUDGET_SECONDS = 3.0


@pytest.fixture(scope="module")
def fake_slack() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as fake:
        yield fake


@pytest.fixture
def slack_settings(settings: Settings, fake_slack: FakeSlack, task_queue: str) -> Settings:
    value = settings.model_copy(
        update={
            "slack_signing_secret": SecretStr(SECRET),
            "slack_bot_token": SecretStr(TOKEN),
            "slack_api_url": fake_slack.base_url,
            "task_queue": task_queue,
        }
    )
    activity_runtime.configure(value)
    return value


@pytest.fixture
async def http(slack_settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(slack_settings, client)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app):  # the inbox dispatcher runs in the lifespan
        async with httpx.AsyncClient(transport=transport, base_url="http://surfaces.test") as http:
            yield http


async def stored_agent(settings: Settings, channel: str, **spec: Any) -> StoredAgent:
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": f"slack-{uuid.uuid4().hex[:8]}"},
            "spec": {"surfaces": {"slack": {"channels": [channel], **spec.pop("slack", {})}}, **spec},
        }
    )
    stored, _ = await apply_agent(await get_pool(settings.require_database_url()), config)
    return stored


# Signatures ------------------------------------------------------------------------------


async def test_url_verification_answers_the_challenge(http: httpx.AsyncClient) -> None:
    payload = {"type": "url_verification", "token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9C"}
    response = await post_event(http, payload)
    assert response.status_code == 200
    assert response.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9C"}


async def test_forged_stale_and_unsigned_requests_are_refused_and_start_nothing(
    http: httpx.AsyncClient,
    slack_settings: Settings,
    client: Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    channel = new_channel()
    await stored_agent(slack_settings, channel)
    payload = mention(channel)
    body = json.dumps(payload).encode()
    json_type = {"Content-Type": "application/json"}
    forged = {**json_type, **signed(body, secret="not-the-secret")}
    stale = {**json_type, **signed(body, timestamp=int(time.time()) - 301)}
    tampered = {**json_type, **signed(body)}
    attempts = [
        (body, forged),
        (body, stale),
        (body, json_type),
        (body, {**json_type, "X-Slack-Signature": signed(body)["X-Slack-Signature"]}),
        (body, {**json_type, "X-Slack-Request-Timestamp": str(int(time.time()))}),
        (body.replace(b"summarize", b"delete all"), tampered),
        (body, {**json_type, **signed(body), "X-Slack-Request-Timestamp": "soon"}),
    ]
    with caplog.at_level("WARNING", logger="openloop.slack"):
        for content, headers in attempts:
            for path in ("/slack/events", "/slack/interactivity"):
                response = await http.post(path, content=content, headers=headers)
                assert response.status_code == 401, (path, headers)
    assert "replay?" in caplog.text and "signature does not match" in caplog.text
    assert "missing X-Slack-Signature" in caplog.text
    assert await started_input(client, task_id_for("slack", payload["event_id"])) is None

    # The genuine delivery still gets through afterwards: nothing was lost.
    assert (await post_event(http, payload)).status_code == 200
    assert await settled(slack_settings, payload["event_id"]) == "started"
    assert await started_input(client, task_id_for("slack", payload["event_id"])) is not None
    await terminate(client, task_id_for("slack", payload["event_id"]))


async def test_malformed_bodies_are_rejected(http: httpx.AsyncClient) -> None:
    for body in (b"{not json", b"[1, 2]"):
        response = await http.post("/slack/events", content=body, headers=signed(body))
        assert response.status_code == 400
    no_event = json.dumps({"type": "event_callback", "event_id": "EvX"}).encode()
    assert (await http.post("/slack/events", content=no_event, headers=signed(no_event))).status_code == 400
    for body in (b"payload=%7Bnot-json", b"nothing=here"):
        response = await http.post("/slack/interactivity", content=body, headers=signed(body))
        assert response.status_code == 400
    binary = b"payload=\xff\xfe"  # signed, but not text: refused before anything reads it
    for path in ("/slack/events", "/slack/interactivity"):
        assert (await http.post(path, content=binary, headers=signed(binary))).status_code == 401


async def test_unsigned_requests_are_refused_when_no_secret_is_configured(
    settings: Settings, client: Client
) -> None:
    app = create_app(settings.model_copy(update={"slack_signing_secret": None}), client)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://surfaces.test"
    ) as http:
        body = json.dumps(mention(new_channel())).encode()
        response = await http.post("/slack/events", content=body, headers=signed(body))
    assert response.status_code == 503


# Mentions ----------------------------------------------------------------------------------


async def test_mention_starts_one_task_for_the_channels_agent_even_when_redelivered(
    http: httpx.AsyncClient,
    slack_settings: Settings,
    client: Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    channel = new_channel()
    agent = await stored_agent(slack_settings, channel)
    payload = mention(
        channel, text=f"<@{BOT_USER}> summarize this thread please", thread_ts="1699999999.000001"
    )
    task_id = task_id_for("slack", payload["event_id"])
    begun = time.monotonic()
    response = await post_event(http, payload)
    assert response.status_code == 200
    assert time.monotonic() - begun < ACK_BUDGET_SECONDS
    assert await settled(slack_settings, payload["event_id"]) == "started"
    inp = await started_input(client, task_id)
    assert inp is not None
    assert inp.agent.name == agent.name and inp.agent_version == agent.version
    assert inp.request == "summarize this thread please"
    assert (inp.context.surface, inp.context.channel, inp.context.user) == ("slack", channel, "U_ALICE")
    assert inp.context.thread == "1699999999.000001"  # the thread is the task's context
    assert inp.context.reply_target == "1700000000.000100"  # reactions go on the mention
    assert inp.context.event_id == payload["event_id"]
    first_run = (await client.get_workflow_handle(task_id).describe()).run_id

    with caplog.at_level("INFO", logger="openloop.slack"):
        for retry in ("1", "2"):
            again = await post_event(
                http, payload, {"X-Slack-Retry-Num": retry, "X-Slack-Retry-Reason": "http_timeout"}
            )
            assert again.status_code == 200
    assert caplog.text.count("duplicate") == 2
    description = await client.get_workflow_handle(task_id).describe()
    assert description.run_id == first_run and description.status == WorkflowExecutionStatus.RUNNING
    await terminate(client, task_id)


async def test_bots_never_start_tasks(
    http: httpx.AsyncClient, slack_settings: Settings, client: Client
) -> None:
    channel = new_channel()
    await stored_agent(slack_settings, channel)
    from_bots = [
        mention(channel, bot_id="B_OTHER"),
        mention(channel, subtype="bot_message"),
        mention(channel, user=BOT_USER),  # our own bot user
        mention(channel, user=BOT_USER, bot_id=BOT_ID),
    ]
    for payload in from_bots:  # seen from the payload alone: not even recorded
        assert (await post_event(http, payload)).status_code == 200
        assert await settled(slack_settings, payload["event_id"]) is None
        assert await started_input(client, task_id_for("slack", payload["event_id"])) is None


async def test_a_channel_without_an_agent_gets_one_helpful_reply(
    http: httpx.AsyncClient, slack_settings: Settings, client: Client, fake_slack: FakeSlack
) -> None:
    channel = new_channel()
    payload = mention(channel)
    for retry in ({}, {"X-Slack-Retry-Num": "1"}):
        assert (await post_event(http, payload, retry)).status_code == 200
    assert await settled(slack_settings, payload["event_id"]) == "no agent for channel"

    def replies_here() -> list[dict[str, Any]]:
        return [c for c in fake_slack.calls_to("chat.postMessage") if c["channel"] == channel]

    await eventually_async(replies_here, "the reply", 10.0)
    await asyncio.sleep(0.2)  # a second reply, if any, would be on its way by now
    replies = replies_here()
    assert len(replies) == 1
    assert replies[0]["thread_ts"] == "1700000000.000100"
    assert "No agent is set up" in replies[0]["text"] and "openloop agents apply -f" in replies[0]["text"]
    assert await started_input(client, task_id_for("slack", payload["event_id"])) is None


async def test_trigger_policy_admits_listed_users_and_group_members_only(
    http: httpx.AsyncClient, slack_settings: Settings, client: Client, fake_slack: FakeSlack
) -> None:
    channel = new_channel()
    fake_slack.set_usergroup("S_ONCALL", ["U_MEMBER"])
    await stored_agent(
        slack_settings,
        channel,
        slack={"triggers": {"everyone": False, "users": ["U_LISTED"], "usergroups": ["S_ONCALL"]}},
    )
    outcomes = {}
    for user in ("U_LISTED", "U_MEMBER", "U_STRANGER"):
        payload = mention(channel, user=user)
        assert (await post_event(http, payload)).status_code == 200
        await settled(slack_settings, payload["event_id"])
        task_id = task_id_for("slack", payload["event_id"])
        outcomes[user] = await started_input(client, task_id) is not None
        if outcomes[user]:
            await terminate(client, task_id)
    assert outcomes == {"U_LISTED": True, "U_MEMBER": True, "U_STRANGER": False}
    await eventually_async(
        lambda: [e for e in fake_slack.ephemerals if e["channel"] == channel], "the private note", 10.0
    )
    told = [e for e in fake_slack.ephemerals if e["channel"] == channel]
    assert [e["user"] for e in told] == ["U_STRANGER"]
    assert "not on the list" in told[0]["text"]


async def test_a_temporal_outage_is_acked_and_the_task_starts_once_temporal_is_back(
    slack_settings: Settings, client: Client
) -> None:
    from workers.embedded import free_port

    channel = new_channel()
    await stored_agent(slack_settings, channel)
    payload = mention(channel)
    task_id = task_id_for("slack", payload["event_id"])
    dead = await Client.connect(f"127.0.0.1:{free_port()}", lazy=True, data_converter=client.data_converter)
    down = create_app(slack_settings, dead)
    async with (
        down.router.lifespan_context(down),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=down), base_url="http://surfaces.test") as outage,
    ):
        assert (await post_event(outage, payload)).status_code == 200  # recorded: Slack is done
        pool = await get_pool(slack_settings.require_database_url())

        async def tried() -> bool:
            async with pool.connection() as conn:
                row = await (
                    await conn.execute(
                        "SELECT attempts, outcome, handled_at FROM slack_inbox WHERE event_id = %s",
                        (payload["event_id"],),
                    )
                ).fetchone()
            return bool(row and row["attempts"] >= 1 and row["outcome"] and row["handled_at"] is None)

        deadline = time.monotonic() + 15
        while not await tried():
            assert time.monotonic() < deadline, "the dispatcher never tried the start"
            await asyncio.sleep(0.05)
    assert await started_input(client, task_id) is None

    back = create_app(slack_settings, client)  # a restarted server drains the inbox
    async with back.router.lifespan_context(back):
        assert await settled(slack_settings, payload["event_id"]) == "started"
    assert await started_input(client, task_id) is not None
    executions = [e async for e in client.list_workflows(f"WorkflowId = '{task_id}'")]
    assert len(executions) == 1
    await terminate(client, task_id)


async def test_a_database_outage_answers_5xx_so_slacks_retry_loses_nothing(
    slack_settings: Settings, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    from workers.embedded import free_port

    unreachable = slack_settings.model_copy(
        update={"database_url": f"postgresql://openloop@127.0.0.1:{free_port()}/openloop?connect_timeout=1"}
    )
    app = create_app(unreachable, client)
    with caplog.at_level("ERROR", logger="openloop.slack"):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://surfaces.test"
        ) as http:
            response = await post_event(http, mention(new_channel()))
    assert response.status_code == 503 and response.json()["error"] == "not_recorded"
    assert "could not be recorded" in caplog.text


# Clicks ------------------------------------------------------------------------------------


async def test_unknown_actions_and_foreign_buttons_are_rejected(
    http: httpx.AsyncClient, fake_slack: FakeSlack
) -> None:
    before = len(fake_slack.calls)
    assert (await post_click(http, click("t", action_id="somebody_elses_button"))).status_code == 400
    assert (await post_click(http, click("t", value="not json"))).status_code == 400
    view_submission = {"type": "view_submission", "user": {"id": "U1"}}
    assert (await post_click(http, view_submission)).status_code == 400
    odd_shapes = {**click("t"), "user": "U1", "channel": ["C1"], "container": None}
    assert (await post_click(http, odd_shapes)).status_code == 400
    no_actions = {**click("t"), "actions": "approve"}
    assert (await post_click(http, no_actions)).status_code == 400
    assert len(fake_slack.calls) == before  # nothing was posted or changed


async def test_a_click_on_a_missing_or_finished_task_says_so(
    http: httpx.AsyncClient, slack_settings: Settings, client: Client, fake_slack: FakeSlack
) -> None:
    channel = new_channel()
    missing = click(f"task-slack-{uuid.uuid4().hex}", channel=channel)
    assert (await post_click(http, missing)).status_code == 200

    await stored_agent(slack_settings, channel)
    payload = mention(channel)
    await post_event(http, payload)
    assert await settled(slack_settings, payload["event_id"]) == "started"
    task_id = task_id_for("slack", payload["event_id"])
    await terminate(client, task_id)
    assert (await post_click(http, click(task_id, channel=channel))).status_code == 200

    told = [e for e in fake_slack.ephemerals if e["channel"] == channel]
    assert ["no longer exists" in told[0]["text"], "already finished" in told[1]["text"]] == [True, True]
    assert all(e["user"] == "U_APPROVER" and "nothing was changed" in e["text"] for e in told)
    assert all(e["thread_ts"] == "1700000000.000100" for e in told)


# Socket Mode -------------------------------------------------------------------------------


async def test_socket_mode_handles_the_same_events_and_acks_each_envelope(
    slack_settings: Settings, client: Client, fake_slack: FakeSlack
) -> None:
    from surfaces.slack.cli import run_socket_mode

    channel = new_channel()
    await stored_agent(slack_settings, channel)
    settings = slack_settings.model_copy(update={"slack_app_token": SecretStr(fake_slack.app_token)})
    stop = asyncio.Event()
    runner = asyncio.create_task(run_socket_mode(settings, client=client, stop=stop))
    try:
        await eventually_async(lambda: fake_slack.socket_connected, "the Socket Mode connection", 10.0)
        payload = mention(channel, text=f"<@{BOT_USER}> what changed today?")
        envelopes = [
            {
                "envelope_id": "env-mention",
                "type": "events_api",
                "payload": payload,
                "accepts_response_payload": False,
                "retry_attempt": 0,
                "retry_reason": "",
            },
            {
                "envelope_id": "env-redelivered",
                "type": "events_api",
                "payload": payload,
                "accepts_response_payload": False,
                "retry_attempt": 1,
                "retry_reason": "timeout",
            },
            {
                "envelope_id": "env-bot",
                "type": "events_api",
                "payload": mention(channel, bot_id="B_OTHER"),
                "accepts_response_payload": False,
            },
            {
                "envelope_id": "env-click",
                "type": "interactive",
                "payload": click("t", action_id="not_ours"),
                "accepts_response_payload": False,
            },
        ]
        task_id = task_id_for("slack", payload["event_id"])
        for envelope in envelopes:
            fake_slack.socket_send(envelope)
            await eventually_async(
                lambda e=envelope: any(  # type: ignore[misc]
                    ack.get("envelope_id") == e["envelope_id"] for ack in fake_slack.socket_acks
                ),
                f"the ack of {envelope['envelope_id']}",
                10.0,
            )
        assert await settled(settings, payload["event_id"]) == "started"
        # The first sign of work goes up from the surface, as over the Events API.
        await eventually_async(
            lambda: any(
                args.get("timestamp") == payload["event"]["ts"]
                for args in fake_slack.calls_to("reactions.add")
            ),
            "the reaction on the mention",
            10.0,
        )
        executions = [e async for e in client.list_workflows(f"WorkflowId = '{task_id}'")]
        assert len(executions) == 1  # the redelivery found its record; no second run
        inp = await started_input(client, task_id)
        assert inp is not None and inp.request == "what changed today?"
        assert inp.context.channel == channel
        bot_payload = envelopes[2]["payload"]
        assert isinstance(bot_payload, dict)
        assert await started_input(client, task_id_for("slack", bot_payload["event_id"])) is None
        await terminate(client, task_id)
    finally:
        stop.set()
        await asyncio.wait_for(runner, 10)


async def test_without_authorizations_our_own_user_comes_from_auth_test(
    http: httpx.AsyncClient, slack_settings: Settings, client: Client, fake_slack: FakeSlack
) -> None:
    channel = new_channel()
    await stored_agent(slack_settings, channel)
    ours = mention(channel, user=BOT_USER)
    del ours["authorizations"]
    assert (await post_event(http, ours)).status_code == 200
    assert await settled(slack_settings, ours["event_id"]) == "ignored: from a bot"
    assert await started_input(client, task_id_for("slack", ours["event_id"])) is None
    assert fake_slack.calls_to("auth.test")
    theirs = mention(channel, text=f"<@{BOT_USER}> hello")
    del theirs["authorizations"]
    assert (await post_event(http, theirs)).status_code == 200
    assert await settled(slack_settings, theirs["event_id"]) == "started"
    inp = await started_input(client, task_id_for("slack", theirs["event_id"]))
    assert inp is not None and inp.request == "hello"
    await terminate(client, task_id_for("slack", theirs["event_id"]))
