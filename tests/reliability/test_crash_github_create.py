"""A worker SIGKILLed right after GitHub created an issue and before the tool activity
reported: GitHub has no idempotency keys, yet after recovery exactly one issue exists. The
retried attempt finds the claim it made in Postgres and the hidden marker in the issue it
wrote, instead of creating a second one.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import psycopg
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.fakes.github_api import FakeGitHub
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import eventually_async
from tests.reliability.harness import (
    FAKE_OPENAI_KEY,
    WorkerForker,
    agent_config,
    scalar,
    start,
    stored,
    worker_env,
)
from workers.embedded import TemporalDevServer
from workflows.types import ActivityName, TaskStatus

TOKEN = "ghp_reliability0123456789"


async def test_worker_killed_after_github_accepted_an_issue_leaves_exactly_one(
    client: Client,
    dev_server: TemporalDevServer,
    pg_url: str,
    task_queue: str,
    tmp_path: Path,
    forker: WorkerForker,
) -> None:
    github = FakeGitHub(token=TOKEN).start()
    repo = f"acme/r{uuid.uuid4().hex[:8]}"
    github.add_repo(repo)
    github.hang_after_accept("POST", f"/repos/{repo}/issues", seconds=20)  # created, no answer
    model = FakeModelAPI().start()
    arguments = {"repo": repo, "title": "Deploy step is flaky", "body": "Failed twice today."}
    model.answer_tool_calls([tool_call("call_1", "github__create_issue", arguments)])
    model.answer("Opened the issue.")
    env = worker_env(
        dev_server.address,
        pg_url,
        task_queue,
        tmp_path,
        OPENLOOP_MODEL_API_BASE=model.base_url,
        OPENAI_API_KEY=FAKE_OPENAI_KEY,
        GITHUB_TOKEN=TOKEN,
        GITHUB_API_URL=github.url,
    )
    first = await forker.spawn("first", env, tmp_path)
    second = None
    try:
        await first.ready()
        agent = await stored(
            pg_url,
            agent_config(
                tools=[{"name": "github.create_issue", "permissions": ["issues:write"], "limit_to": [repo]}]
            ),
        )
        handle = await start(client, task_queue, agent, "Open an issue about the flaky deploy step")
        await eventually_async(lambda: len(github.issues(repo)) == 1, "GitHub to accept the issue", 60)
        await first.kill()  # the issue exists; the activity never reported it
        second = await forker.spawn("second", env, tmp_path)
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        for worker in (first, second):
            if worker is not None:
                await worker.kill()
        model.stop()
        github.stop()

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert len(github.issues(repo)) == 1
    assert github.count("POST", f"/repos/{repo}/issues") == 1
    with psycopg.connect(pg_url) as conn:
        claims = conn.execute(
            "SELECT issue_number FROM github_issue_claims WHERE repo = %s", (repo,)
        ).fetchall()
    assert claims == [(1,)]
    tool_rows = "SELECT count(*) FROM audit_log WHERE task_id = %s AND kind = 'tool_call' AND outcome = 'ok'"
    assert await scalar(pg_url, tool_rows, handle.id) == 1
    # The model heard that the issue already existed, and nothing about a second one.
    told = json.dumps(model.requests[-1].body["messages"])
    assert "Already created issue #1" in told and "#2" not in told
    history = await handle.fetch_history()
    tool_attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled.count(ActivityName.RUN_TOOL) == 1 and max(tool_attempts) == 2
