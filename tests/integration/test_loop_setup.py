"""`sandbox.setup` end to end (dev server, Postgres, bubblewrap, the egress proxies, real pip):
setup installs a package from a local index through its own allowlist while the loop's
commands have no network; the next workspace of the same repository and lockfiles restores
what setup made from the worker's cache instead of running it; a changed lockfile runs it
again; a failing setup stops the loop once, with its reason; a coding task's workspace runs
its agent's setup before the tests it starts with."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.client import Client
from typer.testing import CliRunner

from activities.store import loops as loop_rows
from activities.store.db import get_pool
from surfaces.cli.main import app
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.integration.coding_env import coding_world, result_of
from tests.integration.loop_env import loop_world, project_with
from workflows.loop_types import Limits, LoopStatus, RepoSource, Sandbox, Step
from workflows.setup_types import SandboxSetup

WHEEL = "demo_dep-1.0-py3-none-any.whl"
LIMITS = Limits(total_rounds=1, command_timeout_s=120, stall_timeout_s=60, memory_mb=1024)


def _wheel() -> bytes:
    """A one-module wheel, zipped by hand: what `pip wheel` would build for demo-dep 1.0."""
    files = {
        "demo_dep/__init__.py": b"VALUE = 42\n",
        "demo_dep-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-dep\nVersion: 1.0\n",
        "demo_dep-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("demo_dep-1.0.dist-info/RECORD,,")
    files["demo_dep-1.0.dist-info/RECORD"] = "\n".join(record).encode() + b"\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@dataclass
class Index:
    port: int
    requests: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple/"


@pytest.fixture
async def index() -> AsyncIterator[Index]:
    """A PEP 503 "simple" index on the host's 127.0.0.1 serving one wheel."""
    wheel = _wheel()
    page = f'<html><body><a href="/files/{WHEEL}#sha256={hashlib.sha256(wheel).hexdigest()}">{WHEEL}</a>'
    served = Index(0)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        path = head.split(" ", 2)[1].split("127.0.0.1:" + str(served.port), 1)[-1]
        served.requests.append(path)
        body, kind = {
            "/simple/demo-dep/": (page.encode(), "text/html"),
            f"/files/{WHEEL}": (wheel, "application/octet-stream"),
        }.get(path, (b"", ""))
        status = "200 OK" if kind else "404 Not Found"
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {kind or 'text/plain'}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    served.port = server.sockets[0].getsockname()[1]
    async with server:
        yield served


def _setup(index: Index) -> Sandbox:
    return Sandbox(
        network=False,
        setup=SandboxSetup(
            commands=[
                "python -m venv .venv",
                ".venv/bin/pip install --disable-pip-version-check -r requirements.txt",
            ],
            network=[f"127.0.0.1:{index.port}"],
            env={"PIP_INDEX_URL": index.url},
        ),
    )


def _verify(index: Index) -> str:
    """Passes only with demo-dep importable from the venv (from outside the workspace, so only
    through the venv), the venv's scripts naming this workspace, and the index out of reach."""
    fetch = f"import urllib.request as u; u.urlopen('{index.url}', timeout=5)"
    return (
        '(cd /tmp && "$OPENLOOP_WORKSPACE/.venv/bin/python" -c "import demo_dep; print(demo_dep.VALUE)")'
        ' && grep -q "^#!$OPENLOOP_WORKSPACE/.venv/bin/python" .venv/bin/pip'
        f' && ! python -c "{fetch}" 2>/dev/null && echo index out of reach'
    )


async def _cli(*args: str, pg_url: str, temporal: str = "") -> str:
    env = {"OPENLOOP_DATABASE_URL": pg_url, "OPENLOOP_TEMPORAL_ADDRESS": temporal or None}
    done = await asyncio.to_thread(CliRunner().invoke, app, list(args), env=env)
    assert done.exit_code == 0, done.output
    return done.output


async def test_setup_installs_through_its_allowlist_once_and_the_next_workspace_reuses_it(
    client: Client, pg_url: str, tmp_path: Path, index: Index
) -> None:
    project = project_with(tmp_path, **{"requirements.txt": "demo-dep\n"})
    async with loop_world(client, pg_url, tmp_path, project) as world:
        spec = world.spec({Step.VERIFY: _verify(index)}, sandbox=_setup(index), limits=LIMITS)
        spec = spec.model_copy(update={"repo": RepoSource(path=str(project))})
        first_id, first = await world.run(spec)
        after_first = list(index.requests)
        second_id, second = await world.run(spec)
        after_second = list(index.requests)
        (project / "requirements.txt").write_text("demo-dep==1.0\n")
        third_id, third = await world.run(spec)
        [one], [two], [three] = [await world.reports(i) for i in (first_id, second_id, third_id)]
        pool = await get_pool(pg_url)
        [stored] = await loop_rows.outputs(pool, first_id, 0, "setup")
        [reuse_note] = await loop_rows.outputs(pool, second_id, 0, "setup")

    for result in (first, second, third):
        assert result.status is LoopStatus.SUCCESS, result.reason
    # The first workspace ran setup: pip fetched the wheel through the allowlist.
    assert f"/files/{WHEEL}" in after_first
    assert one.note.startswith("setup passed in") and "cached (" in one.note
    assert "Successfully installed demo-dep-1.0" in bytes(stored["output"]).decode()
    # The loop's own command had no network: the same index was out of its reach.
    [verify] = one.commands
    assert "42" in verify.tail.splitlines() and "index out of reach" in verify.tail and verify.egress is None
    # The second restored it: pip never ran (the index saw nothing), the venv works where it now is.
    assert after_second == after_first
    assert two.note.startswith("setup reused from this worker's cache")
    assert "the setup commands did not run" in bytes(reuse_note["output"]).decode()
    assert "42" in two.commands[0].tail.splitlines()
    # A changed lockfile is another key: setup ran again.
    assert index.requests[len(after_second) :].count(f"/files/{WHEEL}") == 1
    assert three.note.startswith("setup passed in")
    report = await _cli("loops", "report", second_id, pg_url=pg_url)
    assert "setup reused from this worker's cache" in report
    temporal = client.service_client.config.target_host
    status = json.loads(await _cli("loops", "status", second_id, "--json", pg_url=pg_url, temporal=temporal))
    assert status["rounds"][0]["note"].startswith("setup reused from this worker's cache")
    logs = await _cli("loops", "logs", first_id, "--step", "setup", pg_url=pg_url)
    assert "round 0 · setup" in logs and "$ python -m venv .venv" in logs


async def test_a_failing_setup_stops_the_loop_once_with_its_reason(
    client: Client, pg_url: str, tmp_path: Path, index: Index
) -> None:
    fetch = "import urllib.request as u; u.urlopen('http://evil.example/simple/', timeout=10)"
    broken = Sandbox(
        setup=SandboxSetup(commands=["true", f'python -c "{fetch}"'], network=[f"127.0.0.1:{index.port}"])
    )
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        spec = world.spec({Step.VERIFY: "python -m pytest -q"}, sandbox=broken, limits=LIMITS)
        loop_id, result = await world.run(spec)
        reports = await world.reports(loop_id)
        stored = await loop_rows.outputs(await get_pool(pg_url), loop_id, 0, "setup")

    assert result.status is LoopStatus.ERROR and result.rounds == 0 and reports == []
    assert f'setup failed: `python -c "{fetch}"` exited 1: ' in result.reason
    assert "HTTP Error 403" in result.reason  # the last error line of its output
    assert "; blocked: evil.example:80 (not in the allowlist)" in result.reason
    assert result.reason.endswith(f"; its output: openloop loops logs {loop_id} --step setup")
    assert len(stored) == 1  # not retried: one attempt, one stored output
    assert "$ true" in bytes(stored[0]["output"]).decode()
    temporal = client.service_client.config.target_host
    status = await _cli("loops", "status", loop_id, pg_url=pg_url, temporal=temporal)
    assert "ERROR" in status and "setup failed: `python -c" in status


async def test_a_coding_tasks_workspace_runs_the_agents_setup_before_its_first_tests(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    coding = {
        "verify": ".venv/bin/python -m pytest -q -p no:cacheprovider",
        "limits": {"command_timeout": "2m", "memory": "1Gi"},
        "sandbox": {"setup": {"commands": ["python -m venv --system-site-packages .venv"]}},
    }
    async with coding_world(client, pg_url, tmp_path) as world:
        api.answer_tool_calls([tool_call("c1", "code__open_workspace", {"repo": world.repo})])
        api.answer("The mean is off by one.")
        handle = await world.start(
            await world.agent(coding=coding), f"why does test_mean fail in {world.repo}?"
        )
        await result_of(handle)

    # The model hears the workspace is ready, and the tests before any change ran from .venv.
    [opened] = [str(m.get("content")) for m in api.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "setup passed in" in opened and "1 command(s)" in opened, opened
    assert "tests/test_calc.py::test_mean" in opened
    # `explain` shows it where the workspace opened.
    temporal = client.service_client.config.target_host
    env = {"OPENLOOP_TEMPORAL_ADDRESS": temporal, "COLUMNS": "400"}
    explained = await asyncio.to_thread(CliRunner().invoke, app, ["explain", handle.id], env=env)
    assert explained.exit_code == 0, explained.output
    assert "code.open_workspace: ok: opened" in explained.output and "; setup passed in" in explained.output
