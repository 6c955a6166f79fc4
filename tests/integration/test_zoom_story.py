"""The Zoom story on the dev server, real Postgres and the real worker (offline model): a
meeting's `recording.transcript_completed`, delivered twice as Zoom does when it retries,
becomes one task; the transcript is downloaded from the fake Zoom with the delivery's token
(after one 503, retried by the inbox); the summary is posted once, as a new message, in the
agent's Slack channel (the fake Slack); each decision is saved in that channel's memory.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import psycopg
import yaml
from psycopg.rows import dict_row
from pydantic import SecretStr
from temporalio.client import Client

from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.slack.directory_events import rename_channel_name
from surfaces.tasks import task_id_for
from surfaces.zoom.dispatch import post_channel
from tests.fakes import zoom_api
from tests.fakes.slack_api import FakeSlack
from tests.fakes.zoom_api import FakeZoom
from tests.integration.slack_flow_env import TOKEN, slack_setup, surfaces
from workers import worker as worker_module
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import TaskStatus

SECRET = "zoom-story-secret"
TOPIC = "«Weekly platform sync»"
VTT = """WEBVTT

1
00:00:01.000 --> 00:00:05.000
Alice: Two things today: the usage ledger's database and the release date.

2
00:00:05.500 --> 00:00:09.000
Bob: Postgres already runs pgvector for us.

3
00:00:09.500 --> 00:00:13.000
Mia: Decision: Postgres 16 for the usage ledger.

4
00:00:13.500 --> 00:00:17.000
Alice: And we decided to ship the release on December 3rd.
"""


async def dispatched(settings: Settings, delivery: str, seconds: float = 15.0) -> str:
    """What the Zoom inbox did with the delivery, once it handled it."""
    pool = await get_pool(settings.require_database_url())
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        async with pool.connection() as conn:
            cursor = await conn.cursor(row_factory=dict_row).execute(
                "SELECT outcome FROM surface_inbox WHERE surface = 'zoom' AND event_id = %s"
                " AND handled_at IS NOT NULL",
                (delivery,),
            )
            row = await cursor.fetchone()
        if row is not None:
            return str(row["outcome"])
        await asyncio.sleep(0.2)
    raise AssertionError(f"the Zoom inbox did not handle {delivery} within {seconds:g}s")


def host_of(channel: str) -> str:
    """A host per test: two agents may not take the same host's meetings."""
    return f"alice-{channel.lower()}@example.com"


def agent(name: str, channel: str) -> dict[str, Any]:
    document = f"""
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: {name}
spec:
  surfaces:
    slack:
      channels: [{channel}]
    zoom:
      hosts: [{host_of(channel)}]
  tools:
    - name: memory.save
      permissions: [memory:write]
"""
    loaded: dict[str, Any] = yaml.safe_load(document)
    return loaded


async def test_a_transcript_becomes_one_summary_and_the_decisions_in_the_channels_memory(
    settings: Settings, client: Client, task_queue: str
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    with FakeSlack(token=TOKEN) as slack, FakeZoom() as zoom:
        settings = await slack_setup(
            settings, slack, task_queue, agent(f"scribe-{channel[1:7].lower()}", channel)
        )
        settings = settings.model_copy(
            update={"zoom_webhook_secret_token": SecretStr(SECRET), "zoom_api_url": zoom.base_url}
        )
        url, token = zoom.add_transcript(VTT)
        zoom.fail_next(1)  # Zoom struggles once: the inbox tries again
        payload = zoom_api.transcript_completed(
            url, token, host_email=host_of(channel), uuid=f"{uuid.uuid4().hex[:22]}=="
        )
        body = zoom_api.body_of(payload)

        async with worker_module.build_worker(client, settings), surfaces(settings, client) as http:
            first = await http.post("/zoom/webhooks", content=body, headers=zoom_api.signed(body, SECRET))
            again = await http.post("/zoom/webhooks", content=body, headers=zoom_api.signed(body, SECRET))
            assert first.status_code == again.status_code == 200
            assert (first.json()["status"], again.json()["status"]) == ("recorded", "duplicate")
            task_id = task_id_for("zoom", first.json()["delivery"])

            outcome = await dispatched(settings, first.json()["delivery"])
            assert outcome.startswith(f"started {task_id}")
            result = await client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id).result()
            assert result.status == TaskStatus.SUCCESS, result.reason

        assert [d.status for d in zoom.downloads] == [503, 302]
        assert zoom.downloads[-1].authorization == f"Bearer {token}"
        posted = [m for m in slack.calls_to("chat.postMessage") if m["channel"] == channel]
        [summary] = [m for m in posted if "Summary of the meeting" in m.get("text", "")]
        assert not summary.get("thread_ts")  # a new message in the channel
        assert "«Weekly platform sync»" in summary["text"] and "Mia: Decision: Postgres 16" in summary["text"]
        assert "Saved 2 of 2 to this channel's memory." in summary["text"]
        with psycopg.connect(settings.require_database_url()) as conn:
            rows = conn.execute(
                "SELECT content FROM memories WHERE scope_key = %s ORDER BY content", (f"slack:{channel}",)
            ).fetchall()
        assert [r[0] for r in rows] == [
            f"And we decided to ship the release on December 3rd (Alice, in the meeting {TOPIC})",
            f"Postgres 16 for the usage ledger (Mia, in the meeting {TOPIC})",
        ]
        runs = [e async for e in client.list_workflows(f"OpenLoopChannel = '{channel}'")]
        assert [r.id for r in runs] == [task_id]


async def test_a_meeting_no_agent_takes_or_a_refused_token_starts_nothing(
    settings: Settings, client: Client, task_queue: str
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    with FakeSlack(token=TOKEN) as slack, FakeZoom() as zoom:
        settings = await slack_setup(
            settings, slack, task_queue, agent(f"scribe-{channel[1:7].lower()}", channel)
        )
        settings = settings.model_copy(
            update={"zoom_webhook_secret_token": SecretStr(SECRET), "zoom_api_url": zoom.base_url}
        )
        url, _ = zoom.add_transcript(VTT)
        strangers = zoom_api.transcript_completed(url, "t", host_id="someone", host_email="bob@example.org")
        expired = zoom_api.transcript_completed(
            url, "eyJ-expired", host_email=host_of(channel), uuid=f"{uuid.uuid4().hex}=="
        )
        async with surfaces(settings, client) as http:
            outcomes = []
            for payload in (strangers, expired):
                body = zoom_api.body_of(payload)
                answer = await http.post(
                    "/zoom/webhooks", content=body, headers=zoom_api.signed(body, SECRET)
                )
                assert answer.json()["status"] == "recorded"
                outcomes.append(await dispatched(settings, answer.json()["delivery"]))
        assert outcomes[0] == "no agent takes meetings of bob@example.org (account EabCDEFghiJKLmno)"
        assert "refused the download token (401)" in outcomes[1]
        assert [d.status for d in zoom.downloads] == [401]  # no agent: not even downloaded
        assert [e async for e in client.list_workflows(f"OpenLoopChannel = '{channel}'")] == []


async def test_a_post_to_channel_named_by_hash_name_is_the_id_it_was_resolved_to(
    db_settings: Settings,
) -> None:
    """Apply resolves `#name`s to ids and records the names; post_to keeps the name as written."""
    channel = "C" + uuid.uuid4().hex[:10].upper()
    name = f"decisions-{channel[1:7].lower()}"
    document = agent(f"scribe-{channel[1:7].lower()}", channel)
    document["spec"]["surfaces"]["zoom"]["post_to"] = {"surface": "slack", "channel": f"#{name}"}
    pool = await get_pool(db_settings.require_database_url())
    stored, _ = await apply_agent(pool, AgentConfig.model_validate(document))
    assert "apply the agent again" in str(await post_channel(pool, stored))
    await rename_channel_name(pool, channel, name)  # what apply records for a resolved #name
    assert await post_channel(pool, stored) == ("slack", channel)
