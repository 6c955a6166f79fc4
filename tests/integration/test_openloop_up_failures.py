"""`openloop up` when things go wrong: a port already taken starts nothing and leaves nothing
behind; a second `up` on a state folder another one holds says which process holds it and
touches nothing; Ctrl-C while the demo task waits is a clean shutdown (no traceback)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from config.settings import write_stack_file
from tests.integration.up_env import OPENLOOP, STARTUP_SECONDS
from workers.embedded import port_open
from workers.state_lock import hold_state_dir


def _ports(env: dict[str, str]) -> list[int]:
    return [
        int(env["OPENLOOP_TEMPORAL_ADDRESS"].rsplit(":", 1)[1]),
        int(env["OPENLOOP_TEMPORAL_UI_PORT"]),
    ]


def test_a_taken_http_port_starts_nothing_and_leaves_nothing(stack_env: dict[str, str]) -> None:
    host, port = stack_env["OPENLOOP_HTTP_ADDRESS"].rsplit(":", 1)
    with socket.socket() as busy:
        busy.bind((host, int(port)))
        busy.listen()
        done = subprocess.run([*OPENLOOP, "up"], env=stack_env, capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert f"HTTP port {host}:{port} is taken" in out and "OpenLoop is up" not in out
    # Nothing was started, so nothing had to stop (the port is checked before any server).
    assert "applying database migrations" not in out and "Temporal" not in out.split("is taken")[0]
    assert not any(port_open("127.0.0.1", p) for p in _ports(stack_env))
    assert not (Path(stack_env["OPENLOOP_STATE_DIR"]) / "stack.json").exists()
    assert "Traceback" not in out


def _files(folder: Path) -> dict[str, tuple[float, bytes]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime, p.read_bytes())
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_a_second_up_on_a_held_state_folder_names_the_holder_and_touches_nothing(
    stack_env: dict[str, str],
) -> None:
    state = Path(stack_env["OPENLOOP_STATE_DIR"])
    # The first stack (this process holds its lock), on ports of its own.
    ports = {
        "temporal_address": "127.0.0.1:7301",
        "web_ui": "http://127.0.0.1:7302",
        "http": "http://127.0.0.1:7303",
    }
    with hold_state_dir(state, ports):
        write_stack_file(state, {"database_url": "postgresql://postgres:@/postgres?host=/nowhere", **ports})
        before = _files(state)
        done = subprocess.run([*OPENLOOP, "up"], env=stack_env, capture_output=True, text=True, timeout=120)
        after = _files(state)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert f"in use by another `openloop up` (process {os.getpid()}, started " in out, out
    assert "Temporal 127.0.0.1:7301, Web UI http://127.0.0.1:7302, HTTP http://127.0.0.1:7303" in out, out
    assert "OPENLOOP_STATE_DIR" in out and "Traceback" not in out and "OpenLoop is up" not in out
    assert after == before  # stack.json, the lock's record: as the first stack left them
    assert json.loads((state / "stack.json").read_text())["http"] == ports["http"]
    assert not any(port_open("127.0.0.1", p) for p in _ports(stack_env))


def test_ctrl_c_while_the_demo_waits_is_a_clean_shutdown(stack_env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    process = subprocess.Popen(
        [*OPENLOOP, "up", "--demo"],
        env=stack_env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while "Approval needed" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        code = process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
    out = log.read_text()
    assert code == 0, out
    assert "Traceback" not in out and "RPCError" not in out, out
    assert "openloop approve" in out  # the demo said how to approve before it was stopped
    assert not any(port_open("127.0.0.1", p) for p in _ports(stack_env))
    assert not (Path(stack_env["OPENLOOP_STATE_DIR"]) / "stack.json").exists()
