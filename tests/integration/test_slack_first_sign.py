"""The first sign of work, shown by the surface right after the ack, on the real surfaces app,
the real Temporal dev server and Postgres, and the fake Slack Web API.

No worker runs here, so a started task never reaches its first activity: every sign seen is
the surface's own. Covered: a mention and a DM get the working reaction before the task runs
(a DM's assistant status stays the task's to set), the task's own sign later adds nothing
(`already_reacted`), a mention that starts no task gets no sign or has it taken back, and a
429 skips the sign instead of waiting.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool
from pydantic import SecretStr
from temporalio.client import Client

from activities import runtime as activity_runtime
from activities.runtime import Runtime
from activities.slack.posting import WORKING
from activities.slack.surface import task_started
from activities.store.agents import TRUST_CACHED_SECONDS, apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.app import create_app
from surfaces.slack import inbox
from surfaces.slack.dispatch import SlackDispatcher
from surfaces.slack.first_sign import FirstSign
from surfaces.tasks import task_id_for
from tests.fakes.slack_api import FakeSlack
from tests.helpers import eventually_async
from tests.integration.slack_env import (
    SECRET,
    TOKEN,
    mention,
    new_channel,
    pending_only,
    post_event,
    settled,
    started_input,
    terminate,
)
from workflows.types import PostReplyInput, SurfaceContext, TaskStatus


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


@pytest.fixture
def slack_settings(settings: Settings, fake: FakeSlack, task_queue: str) -> Settings:
    value = settings.model_copy(
        update={
            "slack_signing_secret": SecretStr(SECRET),
            "slack_bot_token": SecretStr(TOKEN),
            "slack_api_url": fake.base_url,
            "task_queue": task_queue,
        }
    )
    activity_runtime.configure(value)
    return value


@pytest.fixture
async def http(slack_settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(slack_settings, client)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://surfaces.test") as http,
    ):
        yield http


async def agent(settings: Settings, channel: str, **slack: Any) -> str:
    name = f"sign-{uuid.uuid4().hex[:8]}"
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name},
            "spec": {"surfaces": {"slack": {"channels": [channel], **slack}}},
        }
    )
    await apply_agent(await get_pool(settings.require_database_url()), config)
    return name


def asked(fake: FakeSlack, channel: str) -> tuple[str, dict[str, Any]]:
    """A mention of the bot, in the fake's channel (so reactions can land on it)."""
    ts = fake.add_message(channel, "summarize this thread", user="U_ALICE")
    payload = mention(channel)
    payload["event"]["ts"] = ts
    return ts, payload


async def test_a_mention_shows_the_working_reaction_before_the_task_runs(
    http: httpx.AsyncClient, slack_settings: Settings, client: Client, fake: FakeSlack
) -> None:
    channel = new_channel()
    await agent(slack_settings, channel)
    ts, payload = asked(fake, channel)
    assert (await post_event(http, payload)).status_code == 200
    await eventually_async(lambda: fake.reactions(channel, ts) == [WORKING], "the working reaction", 10.0)
    assert await settled(slack_settings, payload["event_id"]) == "started"
    task_id = task_id_for("slack", payload["event_id"])
    assert await started_input(client, task_id) is not None  # started, and no worker ran it
    assert [c.method for c in fake.calls] == ["reactions.add"]  # the only change: the sign

    # The task's first activity shows its sign over it: Slack says already_reacted, one sign.
    context = SurfaceContext(
        surface="slack", channel=channel, user="U_ALICE", thread=ts, event_id="", reply_target=ts
    )
    started = PostReplyInput(task_id, context, "", TaskStatus.RUNNING, step=0)
    await task_started(started, Runtime(slack_settings))
    assert fake.reactions(channel, ts) == [WORKING]  # asked again, answered already_reacted
    assert len(fake.calls_to("reactions.add")) == 2
    await asyncio.sleep(0.2)
    assert fake.reactions(channel, ts) == [WORKING]  # settled as started: not taken back
    await terminate(client, task_id)


async def test_a_dm_shows_the_working_reaction_and_leaves_the_status_to_the_task(
    http: httpx.AsyncClient, slack_settings: Settings, client: Client, fake: FakeSlack
) -> None:
    await agent(slack_settings, new_channel(), assistant=True)
    dm = "D" + uuid.uuid4().hex[:10].upper()
    ts = fake.add_message(dm, "what changed this week?", user="U_ALICE")
    payload = mention(dm, text="what changed this week?")
    payload["event"] |= {"type": "message", "channel_type": "im", "ts": ts}
    assert (await post_event(http, payload)).status_code == 200
    await eventually_async(lambda: fake.reactions(dm, ts) == [WORKING], "the working reaction", 10.0)
    assert await settled(slack_settings, payload["event_id"]) == "started from a DM"
    # The task sets the assistant status itself when it starts: written once, by the task.
    assert fake.streaming.status_history(dm, ts) == []
    await terminate(client, task_id_for("slack", payload["event_id"]))


async def test_a_mention_that_will_start_nothing_gets_no_sign(
    http: httpx.AsyncClient, slack_settings: Settings, fake: FakeSlack
) -> None:
    listed, unbound = new_channel(), new_channel()
    await agent(slack_settings, listed, triggers={"users": ["U_BOB"]})
    not_allowed_ts, not_allowed = asked(fake, listed)  # Alice may not trigger this agent
    no_agent_ts, no_agent = asked(fake, unbound)
    for payload in (not_allowed, no_agent):
        assert (await post_event(http, payload)).status_code == 200
    assert await settled(slack_settings, not_allowed["event_id"]) == "not allowed to trigger"
    assert await settled(slack_settings, no_agent["event_id"]) == "no agent for channel"
    await asyncio.sleep(0.2)
    assert fake.calls_to("reactions.add") == []
    assert fake.reactions(listed, not_allowed_ts) == fake.reactions(unbound, no_agent_ts) == []


async def test_the_sign_is_taken_back_when_no_task_starts_after_all(
    slack_settings: Settings, client: Client, fake: FakeSlack
) -> None:
    """The agent leaves the channel between the ack and the dispatch: the sign goes away."""
    channel = new_channel()
    name = await agent(slack_settings, channel)
    slack = SlackDispatcher(slack_settings, client)

    async def pool() -> AsyncConnectionPool:
        return await get_pool(slack_settings.require_database_url(), checked=False)

    sign = FirstSign(slack_settings, lambda: slack)
    events = inbox.InboxDispatcher(pool, lambda: slack.handle_event, sign)
    ts, payload = asked(fake, channel)
    assert (await events.accept(payload, 0)).note == "recorded"
    await eventually_async(lambda: fake.reactions(channel, ts) == [WORKING], "the working reaction", 10.0)

    moved = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name},
            "spec": {"surfaces": {"slack": {"channels": [new_channel()]}}},
        }
    )
    await apply_agent(await get_pool(slack_settings.require_database_url()), moved)
    await pending_only(await pool(), payload["event_id"])
    await asyncio.sleep(TRUST_CACHED_SECONDS)  # the surfaces trust their agent list this long
    assert await events.dispatch_due() == 1
    assert await settled(slack_settings, payload["event_id"]) == "no agent for channel"
    await eventually_async(lambda: fake.reactions(channel, ts) == [], "the reaction's removal", 10.0)
    assert len(fake.calls_to("reactions.remove")) == 1
    assert await started_input(client, task_id_for("slack", payload["event_id"])) is None
    await sign.close()


async def test_a_rate_limited_sign_is_skipped_not_queued(
    http: httpx.AsyncClient, slack_settings: Settings, client: Client, fake: FakeSlack
) -> None:
    channel = new_channel()
    await agent(slack_settings, channel)
    fake.rate_limit("reactions.add", times=1, retry_after=30)
    first_ts, first = asked(fake, channel)
    assert (await post_event(http, first)).status_code == 200
    assert await settled(slack_settings, first["event_id"]) == "started"
    await eventually_async(
        lambda: any(c.method == "reactions.add" for c in fake.calls), "a reactions.add call", 10.0
    )
    second_ts, second = asked(fake, channel)  # within the 30 s Slack asked for
    assert (await post_event(http, second)).status_code == 200
    assert await settled(slack_settings, second["event_id"]) == "started"
    await asyncio.sleep(0.3)
    # One try, answered 429, never repeated (not even by slack-sdk's own retry handler), and
    # nothing sent for the next mention while paused: the tasks' own signs will show.
    assert [(c.method, c.status) for c in fake.calls] == [("reactions.add", 429)]
    assert fake.reactions(channel, first_ts) == fake.reactions(channel, second_ts) == []
    for payload in (first, second):
        await terminate(client, task_id_for("slack", payload["event_id"]))
