"""Every request Slack did not sign, or that makes no sense, is refused with the right
status, starts and signals nothing, and leaves a log line saying why.
(Statuses alone: tests/integration/test_slack_events.py.)
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import httpx
import pytest
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier
from temporalio.client import Client

from activities.slack import blocks
from config.settings import Settings
from surfaces.app import create_app
from surfaces.tasks import task_id_for

SECRET = "reliability-signing-secret"
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def signed(body: bytes, *, age: int = 0, secret: str = SECRET) -> dict[str, str]:
    timestamp = str(int(time.time()) - age)
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": str(signature)}


def mention(event_id: str) -> bytes:
    return json.dumps(
        {
            "type": "event_callback",
            "team_id": "T0",
            "event_id": event_id,
            "event_time": 1,
            "event": {
                "type": "app_mention",
                "user": "U_ALICE",
                "channel": "C_REL",
                "ts": "1.0",
                "text": "<@UBOT> deploy everything",
            },
        }
    ).encode()


def click(action_id: str, task_id: str) -> bytes:
    value = json.dumps({"task_id": task_id, "request_id": "apr-1", "action_id": "a" * 32})
    payload = {
        "type": "block_actions",
        "user": {"id": "U_ALICE"},
        "channel": {"id": "C_REL"},
        "container": {"channel_id": "C_REL"},
        "message": {"ts": "2.0"},
        "actions": [{"action_id": action_id, "value": value}],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


@pytest.fixture
async def http(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings.model_copy(update={"slack_signing_secret": SecretStr(SECRET)}), client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as http:
        yield http


async def test_each_rejection_has_its_status_starts_nothing_and_is_logged(
    http: httpx.AsyncClient, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    event_id = "EvREL" + uuid.uuid4().hex[:8].upper()
    body = mention(event_id)
    fresh = signed(body)
    task_id = f"task-rel-{uuid.uuid4().hex[:8]}"
    cases: list[tuple[str, str, bytes, dict[str, str], int]] = [
        ("forged signature", "/slack/events", body, {**JSON, **signed(body, secret="guessed")}, 401),
        (
            "no signature",
            "/slack/events",
            body,
            {**JSON, "X-Slack-Request-Timestamp": fresh["X-Slack-Request-Timestamp"]},
            401,
        ),
        (
            "no timestamp",
            "/slack/events",
            body,
            {**JSON, "X-Slack-Signature": fresh["X-Slack-Signature"]},
            401,
        ),
        ("no headers at all", "/slack/events", body, JSON, 401),
        ("timestamp 301 s old", "/slack/events", body, {**JSON, **signed(body, age=301)}, 401),
        (
            "body changed after signing",
            "/slack/events",
            body.replace(b"deploy", b"delete"),
            {**JSON, **fresh},
            401,
        ),
        ("malformed JSON", "/slack/events", b"{not json", {**JSON, **signed(b"{not json")}, 400),
        ("JSON that is not an object", "/slack/events", b"[1, 2]", {**JSON, **signed(b"[1, 2]")}, 400),
        (
            "forged click",
            "/slack/interactivity",
            click(blocks.APPROVE_ACTION, task_id),
            {**FORM, **signed(click(blocks.APPROVE_ACTION, task_id), secret="guessed")},
            401,
        ),
        (
            "stale click",
            "/slack/interactivity",
            click(blocks.APPROVE_ACTION, task_id),
            {**FORM, **signed(click(blocks.APPROVE_ACTION, task_id), age=301)},
            401,
        ),
        (
            "click without a payload",
            "/slack/interactivity",
            b"nothing=here",
            {**FORM, **signed(b"nothing=here")},
            400,
        ),
        (
            "click payload not an object",
            "/slack/interactivity",
            b"payload=%5B1%5D",
            {**FORM, **signed(b"payload=%5B1%5D")},
            400,
        ),
        (
            "unknown action id",
            "/slack/interactivity",
            click("delete_everything", task_id),
            {**FORM, **signed(click("delete_everything", task_id))},
            400,
        ),
    ]
    unlogged = []
    for name, path, content, headers, status in cases:
        caplog.clear()
        with caplog.at_level("WARNING", logger="openloop.slack"):
            response = await http.post(path, content=content, headers=headers)
        assert response.status_code == status, (name, response.status_code, response.text)
        if not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]:
            unlogged.append(name)
    assert unlogged == [], f"rejected without a log line: {unlogged}"
    # Nothing started for the event, nothing exists for the clicked task.
    for workflow_id in (task_id_for("slack", event_id), task_id):
        with pytest.raises(Exception, match="not found"):
            await client.get_workflow_handle(workflow_id).describe()
