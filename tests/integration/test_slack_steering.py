"""Steering a running task from its Slack thread, on the real dev server, real Postgres, the
real worker and surfaces app (signed events and clicks), the fake Chat Completions API and
the fake Slack Web API:

- an answer that ends in a question waits; "@agent yes" in the thread continues the pending
  proposal in the same task (it used to start a second task, and the first one posted its
  question again when its wait ran out);
- a message while the task works joins it: 👀 on the message, the model's next call sees it,
  the task's record shows it;
- "stop" in the thread, or the progress message's Stop button, cancels the task with a reply
  saying what it did so far;
- someone not allowed to trigger the agent is told so privately, the task hears nothing, and
  the attempt is audited.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import yaml
from temporalio.client import Client, WorkflowHandle

from activities.slack import status as slack_status
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.tasks import task_id_for
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.fakes.model_stream import StreamPlan
from tests.fakes.slack_api import BOT_USER, FakeSlack
from tests.helpers import eventually_async
from tests.integration.slack_env import click, mention, post_click, post_event, settled
from tests.integration.slack_flow_env import TOKEN, slack_setup, surfaces
from workers import worker as worker_module
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import TaskStatus

PROPOSAL = "The decision is Postgres 16. Open an issue to track it?"


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


def agent_config(channel: str, triggers: dict[str, Any] | None = None) -> dict[str, Any]:
    config = yaml.safe_load(
        f"""
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: steer-{uuid.uuid4().hex[:6]}
spec:
  surfaces:
    slack:
      channels: [{channel}]
  tools:
    - name: memory.search
      permissions: [memory:read]
  model_policy: {{default: openai/gpt-4o-mini}}
"""
    )
    if triggers is not None:
        config["spec"]["surfaces"]["slack"]["triggers"] = triggers
    return config


@dataclass
class Thread:
    """A task's thread on the running stack: post into it as people do."""

    http: httpx.AsyncClient
    fake: FakeSlack
    channel: str
    root: str
    handle: WorkflowHandle[Any, Any]

    async def say(self, text: str, user: str = "U_ALICE", *, mentioning: bool = False) -> str:
        """A reply in the thread (as an app_mention when it mentions the agent); its ts."""
        text = f"<@{BOT_USER}> {text}" if mentioning else text
        ts = self.fake.add_message(self.channel, text, user=user, thread_ts=self.root)
        payload = mention(self.channel, user=user, text=text, thread_ts=self.root)
        payload["event"]["ts"] = ts
        if not mentioning:
            payload["event"]["type"] = "message"
        assert (await post_event(self.http, payload)).status_code == 200
        assert await settled_ok(self.http, payload["event_id"])
        return ts

    async def status(self) -> TaskStatus:
        return (await self.handle.query(AgentTaskWorkflow.status)).status

    def bot_texts(self) -> list[str]:
        return [m.get("text", "") for m in self.fake.thread(self.channel, self.root) if m.get("bot_id")]


_settings_of: dict[int, Settings] = {}


async def settled_ok(http: httpx.AsyncClient, event_id: str) -> str | None:
    return await settled(_settings_of[id(http)], event_id)


@asynccontextmanager
async def task_thread(
    settings: Settings,
    client: Client,
    task_queue: str,
    fake: FakeSlack,
    request: str,
    triggers: dict[str, Any] | None = None,
) -> AsyncIterator[Thread]:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    settings = await slack_setup(settings, fake, task_queue, agent_config(channel, triggers))
    text = f"<@{BOT_USER}> {request}"
    root = fake.add_message(channel, text, user="U_ALICE")
    event = mention(channel, text=text)
    event["event"]["ts"] = root
    task_id = task_id_for("slack", event["event_id"])
    async with worker_module.build_worker(client, settings), surfaces(settings, client) as http:
        _settings_of[id(http)] = settings
        assert (await post_event(http, event)).status_code == 200
        assert await settled(settings, event["event_id"]) == "started"
        yield Thread(
            http, fake, channel, root, client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
        )


async def test_yes_continues_the_pending_proposal_in_the_same_task(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    api.answer(PROPOSAL)
    api.answer("Opened issue #12 to track it.")
    async with task_thread(settings, client, task_queue, fake, "capture the decision") as thread:

        async def waiting() -> bool:
            return await thread.status() == TaskStatus.WAITING_USER

        await eventually_async(waiting, "the task to wait for the user", 30.0)
        await thread.say("yes", mentioning=True)  # in a channel people mention the agent to answer
        result = await asyncio.wait_for(thread.handle.result(), 30)
        runs = [e async for e in client.list_workflows(f"OpenLoopChannel = '{thread.channel}'")]
        texts = thread.bot_texts()
    assert result.status == TaskStatus.SUCCESS and result.reply == "Opened issue #12 to track it."
    assert len(runs) == 1  # the answer joined the task; no second task
    assert sum(PROPOSAL in text for text in texts) == 1  # the question was asked once
    assert "yes" in json.dumps(api.requests[-1].body["messages"][-1])


async def test_a_message_while_the_task_works_joins_it(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    search = tool_call("call_1", "memory__search", {"query": "database"})
    api.answer_tool_calls([search], delay=2.0)  # the model takes its time: the task is working
    api.answer("Checked staging first, then chose Postgres 16.", stream=StreamPlan(chunk_chars=16))
    async with task_thread(settings, client, task_queue, fake, "pick the database") as thread:
        said = await thread.say("also check staging first")
        assert await thread.status() == TaskStatus.RUNNING
        result = await asyncio.wait_for(thread.handle.result(), 30)
        explained = [s.summary for s in (await thread.handle.query(AgentTaskWorkflow.explain)).steps]
    assert result.status == TaskStatus.SUCCESS, result.reason
    assert fake.reactions(thread.channel, said) == ["eyes"]
    second = json.dumps(api.requests[1].body["messages"])
    assert "also check staging first" in second  # the model's next call read it
    assert "U_ALICE added: also check staging first" in explained


async def test_stop_in_the_thread_cancels_with_what_was_done(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    api.answer_tool_calls([tool_call("call_1", "memory__search", {"query": "database"})])
    api.answer_tool_calls([tool_call("call_2", "memory__search", {"query": "ledger"})], delay=2.0)
    api.answer("never asked")
    async with task_thread(settings, client, task_queue, fake, "pick the database") as thread:

        async def second_call_running() -> bool:
            return len(api.requests) >= 2

        await eventually_async(second_call_running, "the second model call", 30.0)
        said = await thread.say("stop")
        result = await asyncio.wait_for(thread.handle.result(), 30)
    assert result.status == TaskStatus.CANCELLED and "U_ALICE" in result.reason
    assert len(api.requests) == 2  # nothing asked after the stop
    assert fake.reactions(thread.channel, said) == ["octagonal_sign"]
    [reply] = [t for t in thread.bot_texts() if "Cancelled" in t]
    assert "What was done before it stopped" in reply and "memory.search" in reply


async def test_the_stop_button_cancels_a_task_waiting_for_an_answer(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    api.answer(PROPOSAL)
    async with task_thread(settings, client, task_queue, fake, "capture the decision") as thread:

        async def waiting() -> bool:
            return await thread.status() == TaskStatus.WAITING_USER

        await eventually_async(waiting, "the task to wait for the user", 30.0)
        [progress] = [m for m in fake.thread(thread.channel, thread.root) if "task `" in m.get("text", "")]
        [section] = progress["blocks"]
        stop = section["accessory"]
        assert stop["action_id"] == slack_status.STOP_ACTION and stop["value"] == thread.handle.id
        payload = click(thread.handle.id, user="U_ALICE", action_id=stop["action_id"], value=stop["value"])
        payload["channel"]["id"] = thread.channel
        assert (await post_click(thread.http, payload)).status_code == 200
        result = await asyncio.wait_for(thread.handle.result(), 30)
    assert result.status == TaskStatus.CANCELLED
    texts = thread.bot_texts()
    assert sum(PROPOSAL in t for t in texts) == 1  # the unanswered question is not repeated
    assert any("Cancelled" in t and "Nothing had been done yet." in t for t in texts)
    [progress] = [m for m in fake.thread(thread.channel, thread.root) if "task `" in m.get("text", "")]
    assert "accessory" not in progress["blocks"][0]  # no Stop button once it ended


async def test_someone_not_allowed_to_trigger_cannot_steer_and_is_audited(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    api.answer(PROPOSAL)
    api.answer("OK, no issue.")
    only_alice = {"users": ["U_ALICE"]}
    async with task_thread(settings, client, task_queue, fake, "capture the decision", only_alice) as thread:

        async def waiting() -> bool:
            return await thread.status() == TaskStatus.WAITING_USER

        await eventually_async(waiting, "the task to wait for the user", 30.0)
        said = await thread.say("yes, and delete the repo", user="U_MALLORY")
        stop = click(
            thread.handle.id, user="U_MALLORY", action_id=slack_status.STOP_ACTION, value=thread.handle.id
        )
        stop["channel"]["id"] = thread.channel
        assert (await post_click(thread.http, stop)).status_code == 200
        assert await thread.status() == TaskStatus.WAITING_USER  # the task heard nothing
        await thread.say("no thanks")
        result = await asyncio.wait_for(thread.handle.result(), 30)
        explained = [s.summary for s in (await thread.handle.query(AgentTaskWorkflow.explain)).steps]
    assert result.status == TaskStatus.SUCCESS and result.reply == "OK, no issue."
    assert "delete the repo" not in json.dumps([r.body for r in api.requests])
    assert not any("U_MALLORY" in s for s in explained)
    assert fake.reactions(thread.channel, said) == []
    told = [e for e in fake.ephemerals if e["user"] == "U_MALLORY"]
    assert len(told) == 2 and all("not on the list" in e["text"] for e in told)
    pool = await get_pool(settings.require_database_url())
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT kind, actor, outcome FROM audit_log WHERE task_id = %s AND kind = 'steer_refused'",
                (thread.handle.id,),
            )
        ).fetchall()
    assert len(rows) == 2 and all(row["actor"] == "U_MALLORY" for row in rows)
