"""`openloop up` as a user runs it: starts every part, serves the Web UI and HTTP, runs a task
with an approval from a second terminal, stops cleanly on SIGTERM and keeps data on restart."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.up_env import OPENLOOP, cli, start_up, stop
from workers.embedded import free_port, port_open


@pytest.fixture
def running(stack_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = start_up(stack_env, tmp_path / "up.log")
    yield process
    if process.poll() is None:
        stop(process)


def test_up_serves_everything_runs_a_task_and_stops_cleanly(
    running: subprocess.Popen[bytes], stack_env: dict[str, str], tmp_path: Path
) -> None:
    stack = json.loads((Path(stack_env["OPENLOOP_STATE_DIR"]) / "stack.json").read_text())
    assert stack["database_url"].startswith("postgresql://")
    ui = httpx.get(f"http://127.0.0.1:{stack_env['OPENLOOP_TEMPORAL_UI_PORT']}/", timeout=10)
    assert ui.status_code == 200
    ready = httpx.get(f"http://{stack_env['OPENLOOP_HTTP_ADDRESS']}/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json()["checks"] == {"temporal": "ok", "postgres": "ok"}
    status = cli(stack_env, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "slack inbox" in status.stdout and "ok (0 waiting)" in status.stdout

    # A second `up` on the same state folder, on other ports: refused, naming this one.
    other = {
        **stack_env,
        "OPENLOOP_TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
        "OPENLOOP_TEMPORAL_UI_PORT": str(free_port()),
        "OPENLOOP_HTTP_ADDRESS": f"127.0.0.1:{free_port()}",
    }
    second = subprocess.run([*OPENLOOP, "up"], env=other, capture_output=True, text=True, timeout=120)
    said = second.stdout + second.stderr
    assert second.returncode == 1, said
    assert f"(process {running.pid}, started " in said and f"HTTP {stack['http']}" in said, said
    assert json.loads((Path(stack_env["OPENLOOP_STATE_DIR"]) / "stack.json").read_text()) == stack
    assert cli(stack_env, "status").returncode == 0  # the first stack: still up, still found

    # A second terminal: ask (it parks on the approval), approve, and the answer arrives.
    asked = subprocess.Popen(
        # No terminal here: without --timeout, ask would print the approve command and return.
        [*OPENLOOP, "ask", "helper", "Please remember the decision: ship on Tuesdays", "--timeout", "120"],
        env=stack_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert asked.stdout is not None
    task_id = ""
    for line in asked.stdout:
        if line.startswith("Task "):
            task_id = line.split()[1]
        if "openloop approve" in line:
            break
    assert task_id
    approved = cli(stack_env, "approve", task_id)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    rest = asked.stdout.read()
    assert asked.wait(60) == 0, rest
    assert "Saved to channel memory: ship on Tuesdays" in rest and "SUCCESS" in rest

    assert stop(running) == 0
    for port in (
        stack_env["OPENLOOP_TEMPORAL_ADDRESS"].rsplit(":", 1)[1],
        stack_env["OPENLOOP_TEMPORAL_UI_PORT"],
    ):
        assert not port_open("127.0.0.1", int(port))

    # Same state dir: the agents and the finished task are still there.
    again = start_up(stack_env, tmp_path / "up2.log")
    try:
        recalled = cli(stack_env, "ask", "helper", "What did we decide?")
        assert "ship on Tuesdays" in recalled.stdout, recalled.stdout + recalled.stderr
    finally:
        assert stop(again) == 0
