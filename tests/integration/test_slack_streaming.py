"""A Slack task's answer streams into its thread while the model writes it, and the thread's
status shows the task working: on the real dev server, real Postgres, the real worker and
surfaces app, LiteLLM streaming from the fake Chat Completions API, and the fake Slack Web API
with its agent methods (chat.startStream/appendStream/stopStream, assistant.threads.setStatus).

- an answer broken off mid-stream (the provider fails, and Slack refuses to delete the
  partial message) is retried by Temporal: the thread ends with exactly one answer, the
  streamed message edited into the final text;
- in an assistant thread (a DM) the status is set while the task works and cleared at the end;
- a workspace without the AI features refuses setStatus and startStream: the task still
  succeeds, with one progress message edited in place and the answer posted normally.
"""

from __future__ import annotations

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
from tests.fakes.model_api import FakeModelAPI
from tests.fakes.model_stream import StreamPlan
from tests.fakes.slack_api import BOT_USER, FakeSlack
from tests.integration.slack_env import mention, post_event, settled
from tests.integration.slack_flow_env import TOKEN, slack_setup, surfaces
from workers import worker as worker_module
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import TaskStatus

ANSWER = "Postgres 16 it is: " + " ".join(f"reason {n} holds because the ledger needs it." for n in range(12))


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


def agent_config(channel: str) -> dict[str, Any]:
    return yaml.safe_load(
        f"""
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: stream-{uuid.uuid4().hex[:6]}
spec:
  surfaces:
    slack:
      channels: [{channel}]
  model_policy: {{default: openai/gpt-4o-mini}}
"""
    )


def bot_messages(fake: FakeSlack, channel: str, root: str) -> list[dict[str, Any]]:
    return [m for m in fake.thread(channel, root) if m.get("bot_id")]


async def run_task(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, channel: str
) -> tuple[str, str, Any]:
    """Mention the agent in `channel` through the surfaces app; (root ts, task id, result)."""
    settings = await slack_setup(settings, fake, task_queue, agent_config(channel))
    text = f"<@{BOT_USER}> which database for the ledger?"
    root = fake.add_message(channel, text, user="U_ALICE")
    event = mention(channel, text=text)
    event["event"]["ts"] = root
    task_id = task_id_for("slack", event["event_id"])
    async with worker_module.build_worker(client, settings), surfaces(settings, client) as http:
        assert (await post_event(http, event)).status_code == 200
        assert await settled(settings, event["event_id"]) == "started"
        result = await client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id).result()
    return root, task_id, result


async def test_an_answer_broken_off_mid_stream_and_retried_leaves_one_answer(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    api.answer(ANSWER, stream=StreamPlan(chunk_chars=12, cut_after=4))  # breaks off mid-answer
    api.answer(ANSWER, stream=StreamPlan(chunk_chars=12))
    fake.fail_next("chat.delete", "internal_error")  # the first attempt cannot clean up itself

    root, task_id, result = await run_task(settings, client, task_queue, fake, channel)

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert all(request.body.get("stream") for request in api.requests)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (11, 7)  # from the stream
    first, second = fake.calls_to("chat.startStream")
    assert first["recipient_user_id"] == "U_ALICE" and first["recipient_team_id"] == "T0FAKE"
    assert first["thread_ts"] == root
    answers = [m for m in bot_messages(fake, channel, root) if "reason" in m.get("text", "")]
    assert len(answers) == 1, [m["text"] for m in bot_messages(fake, channel, root)]
    [answer] = answers
    # The second attempt's stream, edited into the final text the workflow recorded.
    assert answer["text"] == ANSWER == result.reply
    assert fake.streaming.stream_of(channel, answer["ts"]) is not None
    assert not any(c["text"] == ANSWER for c in fake.calls_to("chat.postMessage"))
    # The first attempt's partial message was removed by the retry, and forgotten.
    deleted = [c["ts"] for c in fake.calls_to("chat.delete")]
    assert deleted and answer["ts"] not in deleted
    pool = await get_pool(settings.require_database_url())
    async with pool.connection() as conn:
        rows = await (
            await conn.execute("SELECT ts FROM answer_streams WHERE task_id = %s", (task_id,))
        ).fetchall()
    assert [row["ts"] for row in rows] == [answer["ts"]]
    appends = fake.calls_to("chat.appendStream")
    assert len(appends) < len(ANSWER) // 12 / 2  # batched, not one call per piece


async def test_status_is_set_and_cleared_in_an_assistant_thread(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    channel = "D" + uuid.uuid4().hex[:10].upper()  # a DM with the agent
    api.answer(ANSWER, stream=StreamPlan(chunk_chars=40))

    root, _, result = await run_task(settings, client, task_queue, fake, channel)

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert fake.streaming.status_history(channel, root) == [slack_status.WORKING_STATUS, ""]
    messages = bot_messages(fake, channel, root)
    assert [m["text"] for m in messages] == [ANSWER]  # the streamed answer; no progress message
    assert fake.reactions(channel, root) == ["white_check_mark"]


async def test_without_the_ai_features_the_progress_message_stands_in_and_the_answer_is_posted(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    channel = "D" + uuid.uuid4().hex[:10].upper()
    fake.streaming.disable_ai_features("not_allowed_token_type")
    api.answer(ANSWER, stream=StreamPlan(chunk_chars=40))

    root, task_id, result = await run_task(settings, client, task_queue, fake, channel)

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert fake.streaming.status_history(channel, root) == []
    tried = [c.method for c in fake.calls if c.method in ("assistant.threads.setStatus", "chat.startStream")]
    assert "assistant.threads.setStatus" in tried and "chat.startStream" in tried
    progress, answer = bot_messages(fake, channel, root)
    assert task_id in progress["text"] and "Done" in progress["text"] and "edited" in progress
    assert answer["text"] == ANSWER
    assert [c["text"] for c in fake.calls_to("chat.postMessage")][-1] == ANSWER
