"""A task waiting under its agent's task limits says so in its Slack thread, once, and shows
the paused reaction; when it starts, the working reaction replaces it. Real slack-sdk client
against the fake Slack Web API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from activities.runtime import Runtime
from activities.slack.posting import PAUSED, WORKING
from activities.slack.surface import task_started
from config.settings import Settings
from tests.fakes.slack_api import FakeSlack
from tests.integration.slack_env import TOKEN, new_channel
from workflows.types import PostReplyInput, SurfaceContext, TaskStatus

QUEUED = "Queued: ops is at its task limit (max_concurrent_tasks: 2; 2 running). This task is next in line."


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


async def test_a_queued_task_says_so_in_the_thread_once_then_starts(fake: FakeSlack) -> None:
    runtime = Runtime(Settings(slack_bot_token=SecretStr(TOKEN), slack_api_url=fake.base_url))
    channel = new_channel()
    ts = fake.add_message(channel, "<@U_BOT> summarize this", user="U_ALICE")
    context = SurfaceContext(surface="slack", channel=channel, user="U_ALICE", thread=ts, reply_target=ts)

    queued = PostReplyInput("task-slack-1", context, QUEUED, TaskStatus.QUEUED, 0)
    await task_started(queued, runtime)
    await task_started(queued, runtime)  # a retried activity posts nothing more
    said = [m["text"] for m in fake.thread(channel, ts)[1:]]
    assert said == [QUEUED]
    assert fake.reactions(channel, ts) == [PAUSED]

    await task_started(PostReplyInput("task-slack-1", context, "", TaskStatus.RUNNING, 0), runtime)
    assert fake.reactions(channel, ts) == [WORKING]
