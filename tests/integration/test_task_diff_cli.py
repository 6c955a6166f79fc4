"""`openloop tasks diff` against a real coding task (real Temporal, Postgres, a loop worker, git's
smart HTTP and a fake GitHub; the scripted model fixes the demo project's failing test). The
task stops at its pending pull-request approval, and the CLI runs as its own process, as a
user runs it, with its output in a pipe:

- the patch it prints is the stored diff the approval names, byte for byte, and applies with
  `git apply` to a clean checkout of the demo project, fixing it; on a terminal it is
  coloured like `git diff`;
- `--stat` prints the stat and the tests before and after;
- a task that never opened a workspace, and a diff no longer stored, each say so (exit 1).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import pty
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from activities.store.db import get_pool
from tests.fakes.model_api import FakeModelAPI
from tests.helpers import pending_approval
from tests.integration.coding_env import cloned, coding_world, result_of, script_fix
from workers.embedded import TemporalDevServer
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, TaskStatus

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Ran:
    code: int
    stdout: bytes
    stderr: str


async def openloop(dev_server: TemporalDevServer, pg_url: str, *args: str) -> Ran:
    """The CLI in a process of its own, its stdout a pipe (not a terminal)."""
    env = {
        **os.environ,
        "OPENLOOP_TEMPORAL_ADDRESS": dev_server.address,
        "OPENLOOP_DATABASE_URL": pg_url,
        "COLUMNS": "200",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "surfaces.cli",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return Ran(process.returncode, out, err.decode())


def on_a_terminal(dev_server: TemporalDevServer, pg_url: str, *args: str) -> str:
    """The CLI with its stdout a terminal (a pseudo-terminal read here); what it showed."""
    leader, follower = pty.openpty()
    env = {**os.environ, "OPENLOOP_TEMPORAL_ADDRESS": dev_server.address, "OPENLOOP_DATABASE_URL": pg_url}
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm-256color"
    with os.fdopen(leader, "rb", buffering=0) as shown:
        done = subprocess.run(
            [sys.executable, "-m", "surfaces.cli", *args], cwd=ROOT, env=env, stdout=follower, timeout=120
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = shown.read(4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    assert done.returncode == 0
    return b"".join(chunks).decode()


def git(checkout: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=checkout, input=stdin, capture_output=True)


async def test_tasks_diff_prints_the_pending_diff_as_a_patch_that_applies_and_its_stat(
    client: Client, dev_server: TemporalDevServer, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    async with coding_world(client, pg_url, tmp_path) as world:
        script_fix(api, world.repo)
        agent = await world.agent()
        handle = await world.start(agent, f"test_mean fails on main in {world.repo}; fix it")
        pending = await pending_approval(handle)
        patch = await openloop(dev_server, pg_url, "tasks", "diff", handle.id)
        stat = await openloop(dev_server, pg_url, "tasks", "diff", handle.id, "--stat")
        coloured = await asyncio.to_thread(on_a_terminal, dev_server, pg_url, "tasks", "diff", handle.id)
        checkout = cloned(world, "main", tmp_path / "clean")

        await handle.signal(
            AgentTaskWorkflow.deny, ApprovalDecision(pending.request_id, pending.action_id, "cli:local")
        )
        assert (await result_of(handle)).status == TaskStatus.SUCCESS
        # A task that never opened a workspace says so.
        api.answer("Nothing to change.")
        plain = await world.start(agent, "what does calc.mean do?")
        await result_of(plain)
        none = await openloop(dev_server, pg_url, "tasks", "diff", plain.id)
        # A diff that is no longer stored says so.
        sha = str(pending.arguments["diff_sha256"])
        async with (await get_pool(pg_url)).connection() as conn:
            await conn.execute("DELETE FROM workspace_diffs WHERE sha256 = %s", (sha,))
        gone = await openloop(dev_server, pg_url, "tasks", "diff", handle.id)

    assert patch.code == 0, patch.stderr
    assert hashlib.sha256(patch.stdout).hexdigest() == sha  # the diff the approval names
    assert b"\x1b[" not in patch.stdout  # no colours in a pipe
    assert patch.stdout.startswith(b"diff --git a/calc.py b/calc.py")
    checked = git(checkout, "apply", "--check", "-", stdin=patch.stdout)
    assert checked.returncode == 0, checked.stderr
    assert git(checkout, "apply", "-", stdin=patch.stdout).returncode == 0
    assert "return sum(values) / len(values)" in (checkout / "calc.py").read_text()

    # On a terminal, coloured like `git diff`: removed lines red, added green.
    assert "\x1b[31m-    return sum(values) / (len(values) + 1)" in coloured
    assert "\x1b[32m+    return sum(values) / len(values)" in coloured

    assert stat.code == 0, stat.stderr
    lines = stat.stdout.decode().splitlines()
    assert lines[0] == f"1 file(s) changed, +1 −1 (sha256 {sha[:12]})"
    assert lines[1] == "tests before: failed: 1 failing (tests/test_calc.py::test_mean)"
    assert lines[2].startswith("tests after: passed") and "earlier diff" not in lines[2]

    assert none.code == 1 and none.stdout == b""
    assert f"{plain.id} has no workspace" in none.stderr
    assert gone.code == 1 and gone.stdout == b""
    assert f"the diff {sha[:12]} of {handle.id} is not stored" in gone.stderr
