"""`openloop up` from a test, as a user runs it: the environment of a fresh stack (its own
state dir and free ports; the `stack_env` fixture), starting it until it serves, the CLI
against it, and stopping it with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workers.embedded import free_port, port_open

OPENLOOP = [sys.executable, "-m", "surfaces.cli.main"]
STARTUP_SECONDS = 120


@pytest.fixture
def stack_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_")}
    env.update(
        OPENLOOP_STATE_DIR=str(tmp_path / "s"),
        OPENLOOP_TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}",
        OPENLOOP_TEMPORAL_UI_PORT=str(free_port()),
        OPENLOOP_HTTP_ADDRESS=f"127.0.0.1:{free_port()}",
        OPENLOOP_TASK_QUEUE="openloop-up-test",
        COLUMNS="200",
    )
    return env


def start_up(env: dict[str, str], log: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """`openloop up` (in `cwd`, where it looks for ./playbooks), once it serves HTTP."""
    process = subprocess.Popen(
        [*OPENLOOP, "up"], env=env, cwd=cwd, stdout=log.open("ab"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    stack_file = Path(env["OPENLOOP_STATE_DIR"]) / "stack.json"
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        if stack_file.exists() and port_open(
            "127.0.0.1", int(env["OPENLOOP_HTTP_ADDRESS"].rsplit(":", 1)[1])
        ):
            return process
        time.sleep(0.2)
    raise AssertionError(f"openloop up did not come up:\n{log.read_text()}")


def stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(60)


def cli(env: dict[str, str], *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*OPENLOOP, *args], env=env, capture_output=True, text=True, timeout=timeout)
