"""The worker's MCP session cache and listing reuse against real MCP servers (the SDK's own
server API, tests/fakes/mcp_servers.py), counting on the server side what was sent."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from activities.mcp import gateway
from activities.mcp.listings import forget_listings
from activities.mcp.reuse_settings import reuse_settings
from activities.mcp.sessions import close_sessions, session_key, sessions
from activities.mcp.worker_lifetime import mcp_sessions_held
from config.mcp import McpServer
from tests.fakes.mcp_servers import start_http
from tests.helpers import eventually_async
from workers.embedded import free_port

TOKEN = "Bearer t0ken-one"


@pytest.fixture
async def fresh(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[pytest.MonkeyPatch]:
    """No session or listing left from another test; settings from the env the test sets."""
    forget_listings()
    await close_sessions()
    yield monkeypatch
    forget_listings()
    await close_sessions()


class HttpServer:
    """The HTTP test server on one port (stateful: clients initialise a session)."""

    def __init__(self, state: Path) -> None:
        self.state, self.port = state, free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = start_http(state, self.port, TOKEN, stateful=True)

    def restart(self) -> None:
        self.stop()
        self.process = start_http(self.state, self.port, TOKEN, stateful=True)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def sent(self, method: str) -> int:
        log = self.state / f"methods-{self.port}.log"
        return log.read_text().split().count(method) if log.exists() else 0

    def config(self, name: str = "notes", token_from: str = "TEST_MCP_TOKEN") -> McpServer:
        return McpServer.model_validate(
            {
                "name": name,
                "transport": "streamable-http",
                "url": self.url,
                "headers_from_env": {"Authorization": token_from},
                "allow": ["*"],
                "writes": ["create_note"],
            }
        )


@pytest.fixture
def http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpServer]:
    monkeypatch.setenv("TEST_MCP_TOKEN", TOKEN)
    server = HttpServer(tmp_path)
    yield server
    server.stop()


async def sha_of(server: McpServer, tool: str) -> str:
    specs = await gateway.allowed_specs(server)
    return next(spec.sha256 for spec in specs if spec.name == f"{server.name}.{tool}")


async def test_calls_reuse_one_session_and_one_listing(fresh: Any, http: HttpServer) -> None:
    server = http.config()
    sha = await sha_of(server, "read_note")
    for n in range(3):
        result = await gateway.call(server, "read_note", {"name": "deploys"}, f"key-{n}", sha)
        assert result.ok and "Tuesdays" in result.output
    assert http.sent("initialize") == 1  # one handshake for the listing and three calls
    assert http.sent("tools/list") == 1  # the task's listing, reused by each call's schema check
    assert http.sent("tools/call") == 3


async def test_a_restarted_server_is_reconnected_and_a_write_sent_once(
    fresh: Any, http: HttpServer, tmp_path: Path
) -> None:
    server = http.config()
    sha = await sha_of(server, "create_note")
    assert (await gateway.call(server, "create_note", {"title": "before"}, "k1", sha)).ok
    http.restart()  # the new process does not know the session: it answers 404 to its id
    after = await gateway.call(server, "create_note", {"title": "after"}, "k2", sha)
    assert after.ok, after.output
    assert (tmp_path / "calls.log").read_text().splitlines() == ["before", "after"]  # each once
    assert http.sent("initialize") == 2


async def test_a_server_gone_for_good_is_an_unavailable_error_not_a_hang(
    fresh: Any, http: HttpServer
) -> None:
    server = http.config()
    sha = await sha_of(server, "read_note")
    http.stop()
    with pytest.raises(Exception, match="could not be reached"):
        await gateway.call(server, "read_note", {"name": "x"}, "k", sha)


async def test_other_credentials_get_a_session_of_their_own(fresh: Any, http: HttpServer) -> None:
    fresh.setenv("OTHER_TOKEN", "Bearer another-one")
    mine, other = http.config(), http.config(token_from="OTHER_TOKEN")
    await gateway.allowed_specs(mine)
    await gateway.allowed_specs(http.config(name="renamed"))  # same address and credential
    assert http.sent("initialize") == 1
    await gateway.allowed_specs(other)
    assert http.sent("initialize") == 2
    assert session_key(mine) != session_key(other)
    assert "t0ken" not in session_key(mine) and "another" not in session_key(other)


async def test_a_listing_is_reused_within_its_ttl_and_listed_again_after(
    fresh: Any, http: HttpServer
) -> None:
    fresh.setenv("OPENLOOP_MCP_LISTING_TTL_S", "1")
    server = http.config()
    await gateway.allowed_specs(server)
    await gateway.allowed_specs(server)
    assert http.sent("tools/list") == 1
    await asyncio.sleep(1.1)
    await gateway.allowed_specs(server)
    assert http.sent("tools/list") == 2


async def test_a_schema_changed_under_a_reused_listing_is_found_and_told(
    fresh: Any, http: HttpServer, tmp_path: Path
) -> None:
    server = http.config()
    old = await sha_of(server, "shape")
    (tmp_path / "flipped").touch()  # the server's `shape` now needs y too
    first = await gateway.call(server, "shape", {"x": 1}, "k1", old)
    assert first.error_kind == "invalid"
    assert "the schema of notes.shape changed since this task started" in first.output
    calls = http.sent("tools/call")
    again = await gateway.call(server, "shape", {"x": 1}, "k2", old)  # listed afresh: refused before sending
    assert "changed since this task started, so the call was not made" in again.output
    assert http.sent("tools/call") == calls


def stdio_server(state: Path, name: str) -> McpServer:
    command = [sys.executable, "-m", "tests.fakes.mcp_servers", "stdio", str(state)]
    return McpServer.model_validate({"name": name, "transport": "stdio", "command": command, "allow": ["*"]})


def running(state: Path) -> bool:
    found = subprocess.run(["pgrep", "-f", f"mcp_servers stdio {state}"], capture_output=True, check=False)
    return found.returncode == 0


async def test_the_worker_stopping_closes_its_sessions(fresh: Any, tmp_path: Path) -> None:
    server = stdio_server(tmp_path, "notes")
    async with mcp_sessions_held():
        async with mcp_sessions_held():  # a second worker in the process
            await gateway.allowed_specs(server)
        assert running(tmp_path)  # the other worker still runs
    assert not running(tmp_path)


async def test_the_least_recently_used_and_idle_sessions_are_closed(fresh: Any, tmp_path: Path) -> None:
    fresh.setenv("OPENLOOP_MCP_SESSIONS_MAX", "1")
    fresh.setenv("OPENLOOP_MCP_SESSION_IDLE_S", "1")
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    await gateway.allowed_specs(stdio_server(first, "a"))
    await gateway.allowed_specs(stdio_server(second, "b"))
    await eventually_async(lambda: not running(first), "the evicted session's server to exit", 10)
    await eventually_async(lambda: not running(second), "the idle session's server to exit", 10)
    assert not sessions().open or not any(s.alive for s in sessions().open.values())


async def test_a_bad_setting_stops_the_worker_naming_the_variable_and_the_fix(fresh: Any) -> None:
    fresh.setenv("OPENLOOP_MCP_LISTING_TTL_S", "a minute")
    told = r"OPENLOOP_MCP_LISTING_TTL_S='a minute' is not a number.*e\.g\. 60"
    with pytest.raises(ValueError, match=told):
        reuse_settings()
    with pytest.raises(ValueError, match=told):
        async with mcp_sessions_held():  # as the worker starts
            pass
