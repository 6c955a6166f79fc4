"""DMs with the agent and messages from bots, on the real dev server, real Postgres, the real
worker and surfaces app (signed events), the fake Chat Completions API and the fake Slack:

- a DM starts a task that answers in the DM's thread with its status set and cleared; what it
  saves is the DM's own memory, never recalled by the agent's tasks in its channels (even
  with the agent's memory scoped to the whole agent);
- the agent ignores its own messages and other bots, except a bot its channel's agent lists
  in `triggers.bots`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from temporalio.client import Client

from activities.slack import status as slack_status
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.tasks import task_id_for
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.fakes.slack_api import BOT_ID, BOT_USER, FakeSlack
from tests.integration.slack_env import mention, post_event, settled
from tests.integration.slack_flow_env import TOKEN, slack_setup, surfaces
from workers import worker as worker_module
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import TaskStatus


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


def agent_config(channel: str, **slack: Any) -> dict[str, Any]:
    config = yaml.safe_load(
        f"""
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: direct-{uuid.uuid4().hex[:6]}
spec:
  surfaces:
    slack:
      channels: [{channel}]
  memory: {{scope: agent}}
  tools:
    - name: memory.save
      permissions: [memory:write]
  model_policy: {{default: openai/gpt-4o-mini}}
"""
    )
    config["spec"]["surfaces"]["slack"] |= slack
    return config


def dm_event(channel: str, text: str, ts: str, user: str = "U_ALICE") -> dict[str, Any]:
    payload = mention(channel, user=user, text=text)
    payload["event"] |= {"type": "message", "channel_type": "im", "ts": ts}
    return payload


async def test_a_dm_is_a_private_surface_with_its_own_memory(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    dm = "D" + uuid.uuid4().hex[:10].upper()
    settings = await slack_setup(settings, fake, task_queue, agent_config(channel, assistant=True))
    api.answer_tool_calls([tool_call("call_1", "memory__save", {"content": "my badge code is 4711"})])
    api.answer("Saved, just for you.")
    api.answer("Nothing about badges here.")
    text = "remember that my badge code is 4711"
    ts = fake.add_message(dm, text, user="U_ALICE")
    event = dm_event(dm, text, ts)
    async with worker_module.build_worker(client, settings), surfaces(settings, client) as http:
        assert (await post_event(http, event)).status_code == 200
        assert await settled(settings, event["event_id"]) == "started from a DM"
        handle = client.get_workflow_handle_for(
            AgentTaskWorkflow.run, task_id_for("slack", event["event_id"])
        )
        result = await asyncio.wait_for(handle.result(), 30)

        # The same agent in its channel: its memory is scoped to the agent, but not the DM's.
        asked = f"<@{BOT_USER}> what is my badge code?"
        root = fake.add_message(channel, asked, user="U_ALICE")
        in_channel = mention(channel, text=asked)
        in_channel["event"]["ts"] = root
        assert (await post_event(http, in_channel)).status_code == 200
        assert await settled(settings, in_channel["event_id"]) == "started"
        other = client.get_workflow_handle_for(
            AgentTaskWorkflow.run, task_id_for("slack", in_channel["event_id"])
        )
        assert (await asyncio.wait_for(other.result(), 30)).status == TaskStatus.SUCCESS
    assert result.status == TaskStatus.SUCCESS, result.reason
    replies = [m["text"] for m in fake.thread(dm, ts) if m.get("bot_id")]
    assert replies == ["Saved, just for you."]  # in the DM's thread
    assert fake.streaming.status_history(dm, ts) == [slack_status.WORKING_STATUS, ""]
    pool = await get_pool(settings.require_database_url())
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT scope, scope_key FROM memories WHERE content LIKE %s", ("%badge code%",)
            )
        ).fetchall()
    assert [(r["scope"], r["scope_key"]) for r in rows] == [("channel", f"slack:{dm}")]
    assert "4711" not in json.dumps(api.requests[-1].body["messages"])  # never recalled elsewhere


async def test_own_messages_and_other_bots_are_ignored_unless_listed(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    config = agent_config(channel, triggers={"users": ["U_ALICE"], "bots": ["B0DEPLOY"]})
    settings = await slack_setup(settings, fake, task_queue, config)
    api.answer("Deploy notes read.")

    def from_bot(bot_id: str, user: str) -> dict[str, Any]:
        payload = mention(channel, user=user, text=f"<@{BOT_USER}> summarise the deploy")
        payload["event"]["bot_id"] = bot_id
        payload["event"]["ts"] = fake.add_message(channel, payload["event"]["text"], user=user, bot_id=bot_id)
        return payload

    own, stranger, listed = (
        from_bot(BOT_ID, BOT_USER),
        from_bot("B0OTHER", "U0OTHERBOT"),
        from_bot("B0DEPLOY", "U0DEPLOYBOT"),
    )
    async with worker_module.build_worker(client, settings), surfaces(settings, client) as http:
        for payload in (own, stranger, listed):
            assert (await post_event(http, payload)).status_code == 200
        assert await settled(settings, listed["event_id"]) == "started"
        handle = client.get_workflow_handle_for(
            AgentTaskWorkflow.run, task_id_for("slack", listed["event_id"])
        )
        result = await asyncio.wait_for(handle.result(), 30)
        decisions = (await handle.query(AgentTaskWorkflow.explain)).decisions
    for ignored in (own, stranger):  # seen from the payload and the agents: not even recorded
        assert await settled(settings, ignored["event_id"], seconds=1) is None
    assert result.status == TaskStatus.SUCCESS
    assert len(api.requests) == 1  # one task: the listed bot's
    assert any("B0DEPLOY" in d for d in decisions)  # it asked as itself
