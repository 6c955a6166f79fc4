"""Events entering playbooks through the surfaces server, on the real dev server and Postgres:
the same GitHub delivery twice starts one run; a Slack message matching a registered pattern
starts one; `/hooks/NAME` refuses a bad, missing or body-only signature (audited) and starts a
run for a good one, the same request twice starting one run; a webhook sensor makes the event
of the request's body."""

from __future__ import annotations

import hashlib
import hmac
import json
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier
from temporalio.client import Client

from activities.playbooks.sensor_polls import poll_schedule_id
from activities.store import playbooks as playbook_rows
from surfaces import hook_signature
from surfaces.app import create_app
from surfaces.sensors import PLAYBOOKS_DIR_ENV
from tests.fakes.model_api import FakeModelAPI
from tests.integration.playbook_env import (
    PlaybookWorld,
    answer_with,
    field,
    on_event,
    one_step,
    playbook,
    playbook_world,
    user_text,
)
from workflows.playbook_calls import SensorPoll
from workflows.playbook_types import EventType, FieldKind, PlaybookRunStatus, PlaybookStep

GITHUB_SECRET = "gh-secret"
SLACK_SECRET = "slack-signing-secret"
HOOK_SECRET = "deploys-secret"


def signed(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.fixture
async def world(client: Client, pg_url: str, tmp_path: Path) -> AsyncIterator[PlaybookWorld]:
    async with playbook_world(client, pg_url, tmp_path) as value:
        yield value


def http_for(world: PlaybookWorld) -> httpx.AsyncClient:
    settings = world.settings.model_copy(
        update={
            "github_webhook_secret": SecretStr(GITHUB_SECRET),
            "slack_signing_secret": SecretStr(SLACK_SECRET),
        }
    )
    app = create_app(settings, world.client)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://surfaces")


async def test_the_same_github_delivery_twice_starts_one_run(world: PlaybookWorld, api: FakeModelAPI) -> None:
    api.answer(answer_with("Looked.", summary="a real failure"))
    event = EventType(
        name=world.name("CIFailed"),
        fields=(field("repo"), field("branch"), field("run_url")),
        source="github",
        match={"event": "workflow_run", "conclusion": "failure", "branch": ["main", "release"]},
    )
    name = await one_step(
        world, "ci", event, "CI failed on {{ event.repo }} ({{ event.branch }}): {{ event.run_url }}"
    )
    payload: dict[str, Any] = {
        "action": "completed",
        "repository": {"full_name": "acme/api"},
        "workflow_run": {"conclusion": "failure", "head_branch": "main", "html_url": "https://ci/run/7"},
    }
    body = json.dumps(payload).encode()
    delivery = str(uuid.uuid4())
    headers = {
        "X-GitHub-Event": "workflow_run",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signed(GITHUB_SECRET, body),
        "Content-Type": "application/json",
    }
    async with http_for(world) as http:
        first = await http.post("/github/webhook", content=body, headers=headers)
        again = await http.post("/github/webhook", content=body, headers=headers)
        success = {**payload, "workflow_run": {**payload["workflow_run"], "conclusion": "success"}}
        other = json.dumps(success).encode()
        unmatched = await http.post(
            "/github/webhook",
            content=other,
            headers={
                **headers,
                "X-GitHub-Delivery": "d2",
                "X-Hub-Signature-256": signed(GITHUB_SECRET, other),
            },
        )
    run = await world.finished_run(name)

    run_id = f"playbook-{name}-{delivery}"
    assert first.status_code == 202, first.text
    assert first.json() == {"status": "started", "playbook_runs": [run_id]}
    assert again.status_code == 200 and again.json() == {"status": "duplicate", "playbook_runs": [run_id]}
    assert unmatched.json()["status"] == "ignored"  # no agent is bound, no event matches
    assert run.record.run_id == run_id and run.record.run_key == delivery
    assert run.record.status is PlaybookRunStatus.SUCCEEDED, run.record.reason
    assert run.record.event == {"repo": "acme/api", "branch": "main", "run_url": "https://ci/run/7"}
    assert len(api.requests) == 1
    assert '<untrusted-data source="event.run_url">\nhttps://ci/run/7\n</untrusted-data>' in user_text(api, 0)


async def test_a_slack_message_matching_the_pattern_starts_one_run(
    world: PlaybookWorld, api: FakeModelAPI
) -> None:
    api.answer(answer_with("Deploying.", summary="deploy asked"))
    channel = f"C{uuid.uuid4().hex[:8].upper()}"
    event = EventType(
        name=world.name("DeployAsked"),
        fields=(field("text"), field("channel")),
        source="slack",
        match={"kind": "message", "channel": channel, "pattern": "^deploy "},
    )
    name = await one_step(world, "deploys", event, "Asked: {{ event.text }}")
    payload = {
        "type": "event_callback",
        "event_id": f"Ev{uuid.uuid4().hex[:10]}",
        "event": {
            "type": "message",
            "channel": channel,
            "user": "U1",
            "text": "deploy api to prod",
            "ts": "1.2",
        },
    }
    body = json.dumps(payload).encode()
    timestamp = str(int(time.time()))
    signature = SignatureVerifier(SLACK_SECRET).generate_signature(timestamp=timestamp, body=body)
    headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature}
    async with http_for(world) as http:
        first = await http.post("/slack/events", content=body, headers=headers)
        retried = await http.post(
            "/slack/events", content=body, headers={**headers, "X-Slack-Retry-Num": "1"}
        )
    run = await world.finished_run(name)

    assert first.status_code == 200 and retried.status_code == 200
    assert run.record.run_key == payload["event_id"]
    assert run.record.event == {"text": "deploy api to prod", "channel": channel}
    assert run.record.status is PlaybookRunStatus.SUCCEEDED, run.record.reason


async def test_a_signed_hook_starts_a_run_and_a_bad_signature_is_refused_and_audited(
    world: PlaybookWorld, api: FakeModelAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.answer(answer_with("Noted.", summary="deployed v2"))
    hook, secret_env = f"deploys-{world.suffix}", f"DEPLOYS_SECRET_{world.suffix.upper()}"
    monkeypatch.setenv(secret_env, HOOK_SECRET)
    event = EventType(
        name=world.name("Deployed"),
        fields=(field("service"), field("version")),
        source="webhook",
        match={"hook": hook, "secret_env": secret_env},
    )
    name = await one_step(world, "deployed", event, "{{ event.service }} is at {{ event.version }}")
    body = json.dumps({"service": "api", "version": "v2", "extra": 1}).encode()
    async with http_for(world) as http:
        missing = await http.post(f"/hooks/{hook}", content=body)
        good = hook_signature.sign(HOOK_SECRET, body, delivery=f"deploy-{world.suffix}")
        bad = await http.post(
            f"/hooks/{hook}", content=body, headers={**good, "X-OpenLoop-Signature-256": "v1=00"}
        )
        wrong_key = await http.post(
            f"/hooks/{hook}", content=body, headers=hook_signature.sign("guess", body)
        )
        body_only = await http.post(
            f"/hooks/{hook}", content=body, headers={"X-OpenLoop-Signature-256": signed(HOOK_SECRET, body)}
        )
        runs_after_refusals = await playbook_rows.list_runs(await world.pool(), name)
        started = await http.post(f"/hooks/{hook}", content=body, headers=good)
        again = await http.post(f"/hooks/{hook}", content=body, headers=good)
        unknown = await http.post("/hooks/nobody-listens", content=body, headers=good)
    run = await world.finished_run(name)
    async with (await world.pool()).connection() as conn:
        cursor = await conn.execute(
            "SELECT outcome FROM audit_log WHERE task_id = %s AND kind = 'webhook_refused' ORDER BY id",
            (f"hook:{hook}",),
        )
        audited = [row["outcome"] for row in await cursor.fetchall()]

    assert [r.status_code for r in (missing, bad, wrong_key, body_only)] == [401, 401, 401, 401]
    assert runs_after_refusals == []
    assert audited == [
        "missing signature",
        "signature does not match",
        "signature does not match",
        "body-only sha256= signature (it would let the request be replayed)",
    ]
    assert started.status_code == 202, started.text
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    assert unknown.status_code == 404
    assert run.record.event == {"service": "api", "version": "v2"}
    assert run.record.status is PlaybookRunStatus.SUCCEEDED, run.record.reason


async def test_a_webhook_sensor_makes_the_event_of_the_body(
    world: PlaybookWorld, api: FakeModelAPI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    api.answer(answer_with("Paging.", summary="incident"))
    hook, incident = f"sentry-{world.suffix}", world.name("Incident")
    sensors = tmp_path / "playbooks" / "sensors"
    sensors.mkdir(parents=True)
    (sensors / f"sentry_{world.suffix}.py").write_text(
        textwrap.dedent(
            f'''
            from config.playbooks.sensor import sensor

            @sensor(webhook="/hooks/{hook}", emits="{incident}")
            def issues(request):
                if request.get("action") != "created":
                    return None
                issue = request["data"]["issue"]
                return {{"title": issue["title"], "link": issue["permalink"]}}
            '''
        )
    )
    monkeypatch.setenv(PLAYBOOKS_DIR_ENV, str(tmp_path / "playbooks"))
    monkeypatch.setenv(f"OPENLOOP_HOOK_SECRET_{hook.upper().replace('-', '_')}", HOOK_SECRET)
    event = EventType(name=incident, fields=(field("title"), field("link")), source="sensor", match={})
    name = await one_step(world, "incidents", event, "Incident: {{ event.title }} {{ event.link }}")
    created = json.dumps(
        {"action": "created", "data": {"issue": {"title": "KeyError", "permalink": "https://s/1"}}}
    )
    resolved = json.dumps({"action": "resolved", "data": {}})
    async with http_for(world) as http:
        ignored = await http.post(
            f"/hooks/{hook}", content=resolved, headers=hook_signature.sign(HOOK_SECRET, resolved.encode())
        )
        started = await http.post(
            f"/hooks/{hook}", content=created, headers=hook_signature.sign(HOOK_SECRET, created.encode())
        )
    run = await world.finished_run(name)

    assert ignored.status_code == 200 and ignored.json()["status"] == "ignored"
    assert started.status_code == 202, started.text
    assert run.record.event == {"title": "KeyError", "link": "https://s/1"}
    assert run.record.status is PlaybookRunStatus.SUCCEEDED, run.record.reason


async def test_a_poll_sensor_runs_on_its_schedule_and_starts_the_playbook_for_its_event(
    world: PlaybookWorld, api: FakeModelAPI, tmp_path: Path
) -> None:
    api.answer(answer_with("Seen.", summary="queue deep"))
    backlog = world.name("Backlog")
    root = tmp_path / "playbooks"
    (root / "sensors").mkdir(parents=True)
    (root / "sensors" / f"queues_{world.suffix}.py").write_text(
        textwrap.dedent(
            f'''
            from config.playbooks.sensor import sensor

            @sensor(poll="5m", emits="{backlog}")
            def depth(poll):
                return {{"depth": 1200, "at": poll["polled_at"]}}
            '''
        )
    )
    ref = f"queues_{world.suffix}:depth"
    event = EventType(name=backlog, fields=(field("depth", FieldKind.INT), field("at")), source="sensor")
    agent = await world.agent()
    step = PlaybookStep(
        name="look", agent=agent, instructions="Depth {{ event.depth }}.", output=(field("summary"),)
    )
    name = world.name("backlog")
    poll = SensorPoll(ref=ref, emits=backlog, folder=str(root))
    applied = await world.apply([playbook(name, on_event(backlog), step)], [event], polls=[(poll, 300.0)])
    handle = world.client.get_schedule_handle(poll_schedule_id(ref))
    described = await handle.describe()
    await handle.trigger()
    run = await world.finished_run(name)
    removed = await world.apply([])

    assert applied.polls.created == [ref] and removed.polls.deleted == [ref.replace(":", "-")]
    assert described.schedule.spec.intervals[0].every.total_seconds() == 300
    assert run.record.status is PlaybookRunStatus.SUCCEEDED, run.record.reason
    assert run.record.event["depth"] == 1200 and run.record.event["at"][:4].isdigit()
    assert run.record.run_key.startswith(f"{ref}@")
