"""A signed `/hooks/NAME` request cannot be replayed into a new run: its signature covers a
timestamp and its delivery id with the body, so the same request sent again with another (or
no) delivery id, or after 5 minutes, is refused (401, audited), and sent again as it was it is
a duplicate. `openloop hooks sign` makes headers the server accepts. On the real dev server
and Postgres.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from activities.store import playbooks as playbook_rows
from surfaces import hook_signature
from surfaces.app import create_app
from tests.fakes.model_api import FakeModelAPI
from tests.integration.playbook_env import PlaybookWorld, answer_with, field, one_step, playbook_world
from workflows.playbook_types import EventType, PlaybookRunStatus

SECRET = "alerts-secret"


@pytest.fixture
async def world(client: Client, pg_url: str, tmp_path: Path) -> AsyncIterator[PlaybookWorld]:
    async with playbook_world(client, pg_url, tmp_path) as value:
        yield value


async def audited(world: PlaybookWorld, hook: str) -> list[str]:
    async with (await world.pool()).connection() as conn:
        cursor = await conn.execute(
            "SELECT outcome FROM audit_log WHERE task_id = %s AND kind = 'webhook_refused' ORDER BY id",
            (f"hook:{hook}",),
        )
        return [row["outcome"] for row in await cursor.fetchall()]


async def test_a_captured_hook_request_starts_one_run_however_it_is_sent_again(
    world: PlaybookWorld, api: FakeModelAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.answer(answer_with("Paged.", summary="latency"))
    hook, secret_env = f"alerts-{world.suffix}", f"ALERTS_SECRET_{world.suffix.upper()}"
    monkeypatch.setenv(secret_env, SECRET)
    event = EventType(
        name=world.name("Alert"),
        fields=(field("title"),),
        source="webhook",
        match={"hook": hook, "secret_env": secret_env},
    )
    name = await one_step(world, "alerts", event, "Alert: {{ event.title }}")
    body = json.dumps({"title": "p99 above 2 s"}).encode()
    captured = hook_signature.sign(SECRET, body, delivery="alert-4711")
    delivery = hook_signature.DELIVERY_HEADER
    no_delivery = {k: v for k, v in captured.items() if k != delivery}
    stale = hook_signature.sign(SECRET, body, delivery="alert-4712", now=time.time() - 400)
    ahead = hook_signature.sign(SECRET, body, delivery="alert-4713", now=time.time() + 400)
    app = create_app(world.settings, world.client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://surfaces") as http:
        first = await http.post(f"/hooks/{hook}", content=body, headers=captured)
        same = await http.post(f"/hooks/{hook}", content=body, headers=captured)
        other = await http.post(f"/hooks/{hook}", content=body, headers={**captured, delivery: "alert-9999"})
        without = await http.post(f"/hooks/{hook}", content=body, headers=no_delivery)
        late = await http.post(f"/hooks/{hook}", content=body, headers=stale)
        early = await http.post(f"/hooks/{hook}", content=body, headers=ahead)
    run = await world.finished_run(name)

    assert first.status_code == 202, first.text
    assert same.status_code == 200 and same.json()["status"] == "duplicate"
    for refused in (other, without, late, early):
        assert refused.status_code == 401, refused.text
        assert "X-OpenLoop-Timestamp" in refused.json()["how"]
    reasons = await audited(world, hook)
    assert reasons[:2] == ["signature does not match", "signature does not match"], reasons
    assert re.fullmatch(r"signed \d+ s ago, outside the 300 s window \(a replay\?\)", reasons[2])
    assert re.fullmatch(r"dated \d+ s ahead, outside the 300 s window \(a replay\?\)", reasons[3])
    assert len(reasons) == 4
    assert run.record.run_key == f"{hook}-alert-4711" and run.record.status is PlaybookRunStatus.SUCCEEDED
    runs = await playbook_rows.list_runs(await world.pool(), name)
    assert [r.record.run_id for r in runs] == [run.record.run_id]


def sign(secrets: dict[str, str], hook: str, body: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`openloop hooks sign HOOK --body-file BODY ...` with `secrets` in its environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_")} | secrets
    command = [sys.executable, "-m", "surfaces.cli.main", "hooks", "sign", hook, "--body-file", str(body)]
    return subprocess.run([*command, *args], env=env, capture_output=True, text=True, timeout=60)


async def test_openloop_hooks_sign_makes_a_request_the_server_accepts(
    world: PlaybookWorld, api: FakeModelAPI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    api.answer(answer_with("Deployed.", summary="v3"))
    hook, secret_env = f"deploys-{world.suffix}", f"DEPLOYS_SECRET_{world.suffix.upper()}"
    monkeypatch.setenv(secret_env, SECRET)
    event = EventType(
        name=world.name("Deployed"),
        fields=(field("version"),),
        source="webhook",
        match={"hook": hook, "secret_env": secret_env},
    )
    name = await one_step(world, "deployed", event, "At {{ event.version }}")
    body_file = tmp_path / "body.json"
    body_file.write_bytes(b'{"version": "v3"}')
    signing = {secret_env: SECRET}
    curl = sign(signing, hook, body_file, "--secret-env", secret_env)
    listed = sign(signing, hook, body_file, "--secret-env", secret_env, "--headers", "--delivery", "deploy-3")
    unset = sign(signing, hook, body_file)
    assert curl.returncode == 0 and listed.returncode == 0, curl.stderr + listed.stderr
    assert curl.stdout.startswith(f"curl -sS -X POST http://127.0.0.1:8080/hooks/{hook} ")
    assert f"--data-binary @{body_file}" in curl.stdout and "v1=" in curl.stdout
    assert unset.returncode == 2 and f"OPENLOOP_HOOK_SECRET_DEPLOYS_{world.suffix.upper()}" in unset.stderr
    headers = dict(line.split(": ", 1) for line in listed.stdout.splitlines())
    assert headers[hook_signature.DELIVERY_HEADER] == "deploy-3" and SECRET not in listed.stdout

    app = create_app(world.settings, world.client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://surfaces") as http:
        started = await http.post(f"/hooks/{hook}", content=body_file.read_bytes(), headers=headers)
    assert started.status_code == 202, started.text
    run = await world.finished_run(name)
    assert run.record.event == {"version": "v3"} and run.record.run_key == f"{hook}-deploy-3"
