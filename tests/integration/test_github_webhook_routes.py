"""POST /github/webhook, continued: form-encoded deliveries (GitHub's default), a reply that
finds the waiting task behind a newer one in the same thread, and one answer for a
duplicate delivery whether it comes concurrently or later."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlencode

import httpx
import psycopg
import pytest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from activities.github import client as github_client
from activities.store.agents import StoredAgent
from config.settings import Settings
from surfaces.tasks import task_id_for
from tests.fakes.github_api import FakeGitHub
from tests.integration.github_env import (
    SECRET,
    Env,
    comment,
    running_fake,
    task_input,
    terminate,
    webhook_env,
)
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskInput, TaskStatus


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGitHub]:
    with running_fake() as server:
        yield server


@pytest.fixture
async def env(
    settings: Settings, client: Client, fake: FakeGitHub, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Env]:
    monkeypatch.setattr(github_client, "REQUEST_TIMEOUT_SECONDS", 1)
    async with webhook_env(settings, client, fake, task_queue) as value:
        yield value


async def post_form(env: Env, event: str, payload: object, delivery: str) -> httpx.Response:
    body = urlencode({"payload": json.dumps(payload)}).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature,
        "Content-Type": "application/x-www-form-urlencoded",
    }
    return await env.http.post("/github/webhook", content=body, headers=headers)


async def test_form_encoded_deliveries_are_accepted(env: Env, client: Client) -> None:
    await env.bind_agent()
    ping = await post_form(env, "ping", {"zen": "Design for failure.", "hook_id": 1}, "p1")
    assert ping.status_code == 200 and ping.json()["zen"] == "Design for failure."
    delivery = str(uuid.uuid4())
    body = "@openloop what failed? a & b = c"
    started = await post_form(env, "issue_comment", comment(env.repo, body, number=3), delivery)
    task_id = task_id_for("github", delivery)
    assert started.status_code == 202 and started.json()["task_id"] == task_id
    assert "what failed? a & b = c" in (await task_input(client, task_id)).request
    await terminate(client, task_id)


async def start_parked(env: Env, client: Client, agent: StoredAgent, thread: str, status: TaskStatus) -> str:
    """A task of this thread, parked with `status`, and its delivery row."""
    task_id = f"task-github-{uuid.uuid4().hex}"
    context = SurfaceContext(surface="github", channel=env.repo, user="alice", thread=thread)
    await client.start_workflow(
        AgentTaskWorkflow.run,
        TaskInput(task_id, agent.config, agent.version, context, "question?"),
        id=task_id,
        task_queue=f"parked-{uuid.uuid4().hex}",  # no worker: it stays as started
        search_attributes=TypedSearchAttributes([SearchAttributePair(search.STATUS, status.value)]),
    )
    with psycopg.connect(env.settings.require_database_url(), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO github_deliveries (delivery_id, event, task_id, repo, thread, started_at)"
            " VALUES (%s, 'issue_comment', %s, %s, %s, now())",
            (str(uuid.uuid4()), task_id, env.repo, thread),
        )
    return task_id


async def test_a_reply_reaches_the_waiting_task_behind_a_newer_one(env: Env, client: Client) -> None:
    agent = await env.bind_agent()
    waiting = await start_parked(env, client, agent, "11", TaskStatus.WAITING_USER)
    newer = await start_parked(env, client, agent, "11", TaskStatus.RUNNING)  # e.g. a CI investigation
    answer = await env.post("issue_comment", comment(env.repo, "Yes, the staging one", number=11))
    assert answer.status_code == 202 and answer.json() == {"status": "signalled", "task_id": waiting}
    await terminate(client, waiting)
    await terminate(client, newer)


async def test_a_duplicate_delivery_gets_one_answer_concurrent_or_not(env: Env, client: Client) -> None:
    await env.bind_agent()
    delivery = str(uuid.uuid4())
    payload = comment(env.repo, "@openloop why is it red?", number=5)
    answers = await asyncio.gather(*(env.post("issue_comment", payload, delivery) for _ in range(2)))
    task_id = task_id_for("github", delivery)
    assert sorted((a.status_code, a.json()["status"]) for a in answers) == [
        (200, "duplicate"),
        (202, "started"),
    ]
    later = await env.post("issue_comment", payload, delivery)
    assert (later.status_code, later.json()) == (200, {"status": "duplicate", "task_id": task_id})
    await terminate(client, task_id)
