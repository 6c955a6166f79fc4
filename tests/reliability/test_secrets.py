"""Secrets stay in the worker's settings and environment. A task started from a signed
Slack mention, answered by a model reached with a provider key, creating a GitHub issue
with a token and replying in Slack with the bot token, and a second task whose provider
echoes the key back in a 401: none of the provider key, the Slack bot token or signing
secret, the GitHub token or webhook secret appears in a workflow id, an input, a result,
the recorded histories, the logs (DEBUG and up), the traces, or the rows stored for them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr
from temporalio.client import Client

from activities.github import client as github_client
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.app import create_app
from surfaces.tasks import task_id_for
from tests.fakes.github_api import FakeGitHub
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.fakes.slack_api import BOT_USER, FakeSlack
from tests.helpers import eventually_async
from tests.integration.slack_env import mention, settled, signed
from tests.reliability.harness import FAKE_OPENAI_KEY, Handle, agent_config, start, stored
from workers.telemetry import tracing_interceptors
from workers.worker import build_worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import TaskStatus

SLACK_BOT_TOKEN = "xoxb-reliability-" + "5e1f" * 6
SLACK_SIGNING_SECRET = "slack-signing-" + "7c3d" * 6
GITHUB_TOKEN = "ghp_reliability" + "2b9a" * 6
GITHUB_WEBHOOK_SECRET = "gh-webhook-" + "8d4e" * 6
SECRETS = {
    "provider key": FAKE_OPENAI_KEY,
    "Slack bot token": SLACK_BOT_TOKEN,
    "Slack signing secret": SLACK_SIGNING_SECRET,
    "GitHub token": GITHUB_TOKEN,
    "GitHub webhook secret": GITHUB_WEBHOOK_SECRET,
}


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeModelAPI, FakeSlack, FakeGitHub]]:
    model, github = FakeModelAPI().start(), FakeGitHub(token=GITHUB_TOKEN).start()
    monkeypatch.setenv("OPENLOOP_MODEL_API_BASE", model.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    github_client.reset_clients()
    with FakeSlack(token=SLACK_BOT_TOKEN) as slack:
        yield model, slack, github
    model.stop()
    github.stop()
    github_client.reset_clients()


def leaks(where: str, text: str) -> list[str]:
    return [f"{name} in {where}" for name, secret in SECRETS.items() if secret in text]


async def test_no_secret_reaches_ids_inputs_results_history_logs_traces_or_rows(
    client: Client,
    settings: Settings,
    task_queue: str,
    fakes: tuple[FakeModelAPI, FakeSlack, FakeGitHub],
    caplog: pytest.LogCaptureFixture,
) -> None:
    model, slack, github = fakes
    settings = settings.model_copy(
        update={
            "task_queue": task_queue,
            "slack_bot_token": SecretStr(SLACK_BOT_TOKEN),
            "slack_signing_secret": SecretStr(SLACK_SIGNING_SECRET),
            "slack_api_url": slack.base_url,
            "github_token": SecretStr(GITHUB_TOKEN),
            "github_api_url": github.url,
            "github_webhook_secret": SecretStr(GITHUB_WEBHOOK_SECRET),
        }
    )
    url = settings.require_database_url()
    repo, channel = f"acme/r{uuid.uuid4().hex[:8]}", "C" + uuid.uuid4().hex[:9].upper()
    github.add_repo(repo)
    agent = await stored(
        url,
        agent_config(
            tools=[{"name": "github.create_issue", "permissions": ["issues:write"], "limit_to": [repo]}],
            surfaces={"slack": {"channels": [channel]}},
        ),
    )
    model.answer_tool_calls([tool_call("call_1", "github__create_issue", {"repo": repo, "title": "Flaky"})])
    model.answer("Opened the issue.")
    model.fail(401)  # the second task: the provider echoes the key it was given
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = client.config()
    config["interceptors"] = tracing_interceptors(tracer_provider=provider)
    traced = Client(**config)

    caplog.set_level(logging.DEBUG)
    app = create_app(settings, traced)
    async with (
        build_worker(traced, settings),
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://surfaces") as http,
    ):
        root = slack.add_message(channel, "The deploy step failed again.", user="U_ALICE")
        event = mention(channel, text=f"<@{BOT_USER}> open an issue about it", thread_ts=root)
        body = json.dumps(event).encode()
        headers = {"Content-Type": "application/json", **signed(body, secret=SLACK_SIGNING_SECRET)}
        assert (await http.post("/slack/events", content=body, headers=headers)).status_code == 200
        assert await settled(settings, event["event_id"]) == "started"
        slack_id = task_id_for("slack", event["event_id"])
        slack_task: Handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, slack_id)
        first = await asyncio.wait_for(slack_task.result(), 60)
        failing = await start(traced, task_queue, agent, "And another thing")
        second = await asyncio.wait_for(failing.result(), 60)

    # The secrets were really in play.
    assert first.status == TaskStatus.SUCCESS and len(github.issues(repo)) == 1
    assert second.status == TaskStatus.ERROR and "OPENAI_API_KEY" in second.reason
    assert all(r.headers["authorization"] == f"Bearer {FAKE_OPENAI_KEY}" for r in model.requests)
    await eventually_async(lambda: any("Opened the issue." in str(c) for c in slack.calls), "the Slack reply")

    found: list[str] = []
    for handle, result in ((slack_task, first), (failing, second)):
        found += leaks("a workflow id", handle.id)
        found += leaks("a result", json.dumps(result, default=str))
        history = await handle.fetch_history()
        found += leaks(f"the history of {handle.id}", history.to_json())
        description = await handle.describe()
        found += leaks("a description", str(description.raw_description))
    found += leaks("the logs", caplog.text)
    for span in exporter.get_finished_spans():
        found += leaks(f"span {span.name}", span.to_json())
    pool = await get_pool(url)
    async with pool.connection() as conn:
        for table in ("transcript", "audit_log", "usage_ledger"):
            rows = await (
                await conn.execute(
                    f"SELECT * FROM {table} WHERE task_id = ANY(%s)",  # noqa: S608 - fixed names
                    ([slack_task.id, failing.id],),
                )
            ).fetchall()
            assert rows or table == "usage_ledger"
            found += leaks(f"{table} rows", json.dumps(rows, default=str))
    assert found == []
    assert len(exporter.get_finished_spans()) > 5 and len(caplog.records) > 10  # the scan saw them
