"""No HTTP surface reads an unbounded body: past its path's limit a request is answered 413
before its body is read (Content-Length) or as soon as the count passes the limit (chunked);
and a body within the limit whose event Temporal refuses as too large is a 413 with Temporal's
reason, never the 503 "send it again" an outage gets. On the real dev server and Postgres.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from temporalio.client import Client

from activities.store import playbooks as playbook_rows
from config.settings import Settings
from surfaces import hook_signature
from surfaces.app import create_app
from surfaces.limits import GITHUB_MAX_BODY_BYTES, MAX_BODY_BYTES
from surfaces.sensors import PLAYBOOKS_DIR_ENV
from surfaces.web.auth import login_token
from tests.integration.playbook_env import PlaybookWorld, field, on_event, playbook, playbook_world
from workflows.playbook_types import EventType, PlaybookStep

TEN_MB = 10 * 1000 * 1000
GITHUB_SECRET = "gh-limits-secret"
SURFACES = (
    "/hooks/limits",  # a sensor's hook (below), so its handler does read the body
    "/slack/events",
    "/slack/interactivity",
    "/dashboard/logout",
    "/dashboard/approvals/some-task",
    "/dashboard/memory/1/forget",
)


def secrets_on(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"github_webhook_secret": SecretStr(GITHUB_SECRET), "slack_signing_secret": SecretStr("s")}
    )


def connect(settings: Settings, client: Client) -> httpx.AsyncClient:
    app = create_app(secrets_on(settings), client)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://surfaces")


@pytest.fixture
async def http(
    settings: Settings, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    sensors = tmp_path / "playbooks" / "sensors"
    sensors.mkdir(parents=True)
    (sensors / "limits.py").write_text(
        "from config.playbooks.sensor import sensor\n\n\n"
        '@sensor(webhook="/hooks/limits", emits="Limited")\ndef limited(request):\n    return None\n'
    )
    monkeypatch.setenv(PLAYBOOKS_DIR_ENV, str(tmp_path / "playbooks"))
    monkeypatch.setenv(hook_signature_env("limits"), "limits-secret")
    async with connect(settings, client) as value:
        signed_in = await value.get(
            "/dashboard/login", params={"token": login_token(settings, "U_LIM", "admin")}
        )
        assert signed_in.status_code == 303  # so the dashboard's handlers do read their forms
        yield value


class Chunks:
    """A streamed body of `total` bytes that counts how much of it was pulled."""

    def __init__(self, total: int, size: int = 64 * 1024):
        self.total, self.size, self.pulled = total, size, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.pulled < self.total:
            self.pulled += self.size
            yield b"x" * self.size


async def test_a_10_mb_body_is_refused_with_413_on_every_surface_before_it_is_read(
    http: httpx.AsyncClient,
) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}  # what dashboard forms send
    for path in SURFACES:
        answer = await http.post(path, content=b"x" * TEN_MB, headers=form)
        assert answer.status_code == 413, (path, answer.status_code, answer.text[:200])
        assert answer.json()["limit_bytes"] == MAX_BODY_BYTES and path in answer.json()["error"]

        declared = Chunks(TEN_MB)  # Content-Length says 10 MB: not a byte of it is read
        answer = await http.post(path, content=declared, headers={**form, "Content-Length": str(TEN_MB)})
        assert answer.status_code == 413 and declared.pulled == 0, (path, declared.pulled)

        streamed = Chunks(TEN_MB)  # chunked, no length: cut off just past the limit
        answer = await http.post(path, content=streamed, headers=form)
        assert answer.status_code == 413, (path, answer.status_code, answer.text[:200])
        assert streamed.pulled <= MAX_BODY_BYTES + streamed.size, (path, streamed.pulled)

    # GitHub sends payloads of up to 25 MB: 10 MB is read (and its signature checked), more is not.
    assert (await http.post("/github/webhook", content=b"x" * TEN_MB)).status_code == 401
    over = Chunks(GITHUB_MAX_BODY_BYTES + 1024 * 1024)
    answer = await http.post("/github/webhook", content=over)
    assert answer.status_code == 413 and answer.json()["limit_bytes"] == GITHUB_MAX_BODY_BYTES
    assert over.pulled <= GITHUB_MAX_BODY_BYTES + over.size


@pytest.fixture
async def world(client: Client, pg_url: str, tmp_path: Path) -> AsyncIterator[PlaybookWorld]:
    async with playbook_world(client, pg_url, tmp_path) as value:
        yield value


def github_headers(body: bytes) -> dict[str, str]:
    signature = "sha256=" + hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": signature,
        "Content-Type": "application/json",
    }


async def test_an_event_temporal_refuses_as_too_large_is_a_413_with_the_reason_not_a_retry(
    world: PlaybookWorld, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    opened = EventType(
        name=world.name("IssueOpened"),
        fields=(field("title"),),
        source="github",
        match={"event": "issues", "action": "opened"},
    )
    hook, big = f"expand-{world.suffix}", world.name("Expanded")
    sensors = tmp_path / "playbooks" / "sensors"
    sensors.mkdir(parents=True)
    (sensors / f"expand_{world.suffix}.py").write_text(
        textwrap.dedent(
            f'''
            from config.playbooks.sensor import sensor

            @sensor(webhook="/hooks/{hook}", emits="{big}")
            def expand(request):
                return {{"text": request["text"] * 50}}
            '''
        )
    )
    monkeypatch.setenv(PLAYBOOKS_DIR_ENV, str(tmp_path / "playbooks"))
    monkeypatch.setenv(hook_signature_env(hook), "expand-secret")
    expanded = EventType(name=big, fields=(field("text"),), source="sensor", match={})
    step = PlaybookStep(
        name="look", agent=await world.agent(), instructions="Look.", output=(field("summary"),)
    )
    name, expanded_name = world.name("issues"), world.name("expanded")
    await world.apply(  # one apply: the registry is what the last apply said
        [playbook(name, on_event(opened.name), step), playbook(expanded_name, on_event(big), step)],
        [opened, expanded],
    )

    async with connect(world.settings, world.client) as http:
        answers = []
        # 3 MB: over Temporal's 2 MB blob limit; 5 MB: over its 4 MB gRPC message limit.
        for size in (3_000_000, 5_000_000):
            payload = {
                "action": "opened",
                "repository": {"full_name": "acme/x"},
                "issue": {"title": "t" * size},
            }
            body = json.dumps(payload).encode()
            answers.append(await http.post("/github/webhook", content=body, headers=github_headers(body)))
        body = json.dumps({"text": "y" * 60_000}).encode()  # 60 kB signed, 3 MB once the sensor made it
        answers.append(
            await http.post(
                f"/hooks/{hook}", content=body, headers=hook_signature.sign("expand-secret", body)
            )
        )

    for answer, reason in zip(
        answers,
        ("Blob data size exceeds limit", "larger than max", "Blob data size exceeds limit"),
        strict=True,
    ):
        assert answer.status_code == 413, (answer.status_code, answer.text[:300])
        assert "too large for Temporal" in answer.json()["error"] and reason in answer.json()["error"]
        assert "send it again" not in answer.text and "redeliver" not in answer.text
    assert await playbook_rows.list_runs(await world.pool(), name) == []
    assert await playbook_rows.list_runs(await world.pool(), expanded_name) == []


def hook_signature_env(hook: str) -> str:
    from surfaces.hooks import sensor_secret_env

    return sensor_secret_env(hook)
