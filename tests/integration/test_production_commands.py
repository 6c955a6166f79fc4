"""The production commands as an operator (or the release Job, or a probe) runs them:
`openloop setup`, `openloop serve`, `openloop promote`, and `openloop worker` refusing to
start on a bad environment. Real dev server, real Postgres, real processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from workers.embedded import TemporalDevServer, free_port
from workers.schedules import RETENTION_SCHEDULE_ID


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_") and "_API_KEY" not in k}
    return {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra}


def _openloop(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "surfaces.cli.main", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


async def test_setup_migrates_and_puts_the_retention_schedule_in_place_twice_over(
    client: Client, dev_server: TemporalDevServer, pg_url: str, task_queue: str, tmp_path: Path
) -> None:
    env = _env(
        OPENLOOP_TEMPORAL_ADDRESS=dev_server.address,
        OPENLOOP_DATABASE_URL=pg_url,
        OPENLOOP_TASK_QUEUE=task_queue,
        OPENLOOP_STATE_DIR=str(tmp_path),
    )
    for _ in range(2):  # the release Job runs it on every release: it must be repeatable
        result = _openloop("setup", env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "search attributes on default: all present" in result.stdout
        assert "migrations: up to date" in result.stdout  # the session database is migrated
    description = await client.get_schedule_handle(RETENTION_SCHEDULE_ID).describe()
    assert description.schedule.action.task_queue == task_queue  # type: ignore[attr-defined]


def test_promote_without_pollers_fails_with_the_reason(dev_server: TemporalDevServer, tmp_path: Path) -> None:
    env = _env(OPENLOOP_TEMPORAL_ADDRESS=dev_server.address, OPENLOOP_STATE_DIR=str(tmp_path))
    result = _openloop("promote", "nobody-polls", "--deployment", f"d-{uuid.uuid4().hex[:6]}", env=env)
    assert result.returncode == 1
    assert "promote failed" in result.stderr and "pollers" in result.stderr


def test_serve_is_live_at_once_ready_when_temporal_and_postgres_answer_and_stops_on_sigterm(
    dev_server: TemporalDevServer, pg_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = _env(
        OPENLOOP_TEMPORAL_ADDRESS=dev_server.address,
        OPENLOOP_DATABASE_URL=pg_url,
        OPENLOOP_HTTP_ADDRESS=f"127.0.0.1:{port}",
        OPENLOOP_STATE_DIR=str(tmp_path),
    )
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        command = [sys.executable, "-m", "surfaces.cli.main", "serve"]
        process = subprocess.Popen(command, env=env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 90
        ready = None
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
                    if ready.status_code == 200:
                        break
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        assert ready is not None and ready.status_code == 200, log.read_text()
        assert ready.json() == {"ready": True, "checks": {"temporal": "ok", "postgres": "ok"}}
        process.send_signal(signal.SIGTERM)
        # uvicorn finishes open requests, then re-raises the signal: 0 or -SIGTERM, never a hang.
        assert process.wait(30) in (0, -signal.SIGTERM)
        assert "Finished server process" in log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)


def test_worker_without_a_database_url_says_what_to_set(tmp_path: Path) -> None:
    result = _openloop("worker", env=_env(OPENLOOP_STATE_DIR=str(tmp_path)), timeout=60)
    assert result.returncode == 2
    assert "OPENLOOP_DATABASE_URL is not set" in result.stderr


@pytest.mark.parametrize("variable", ["OPENLOOP_MAX_CONCURRENT_ACTIVITIES", "OPENLOOP_VERSIONING_BEHAVIOR"])
def test_worker_with_a_malformed_setting_names_it(variable: str, tmp_path: Path) -> None:
    env = _env(
        OPENLOOP_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none",
        OPENLOOP_BUILD_ID="1",
        OPENLOOP_STATE_DIR=str(tmp_path),
        **{variable: "lots"},
    )
    result = subprocess.run(
        [sys.executable, "-m", "workers.run"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert variable in result.stderr
