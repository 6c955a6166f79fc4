"""An MCP server behind a bearer check that refuses the worker's token (401), and a slow MCP
tool: the refusal is named with its status, URL, variable and header in the task's reply,
`openloop explain`, `openloop mcp list` and the model's tool result, and is not retried; a
call heartbeats while the tool runs. Real servers written with the MCP SDK, the real worker,
Temporal dev server and Postgres."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment
from typer.testing import CliRunner

from activities.mcp.mcp_activities import call_mcp_tool, list_mcp_tools
from config.mcp import McpServer
from config.settings import Settings
from surfaces.cli.main import app
from tests.fakes.mcp_servers import start_http
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import eventually_async
from tests.integration.mcp_env import SECRET, mcp_agent, told
from tests.reliability.harness import start, stored
from workers.embedded import TemporalDevServer, free_port
from workers.history import replay
from workers.worker import build_worker
from workflows.activity_options import MCP_CALL_OPTIONS
from workflows.mcp_types import McpCallInput, McpListInput
from workflows.types import ActivityName, MemoryScopeRef, SurfaceContext, TaskStatus, ToolCallInput

WRONG = "Bearer not-the-right-one"


def serve(state: Path, reject_status: int | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    return start_http(state, port, SECRET, reject_status), f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def bearer_checked(tmp_path: Path) -> Iterator[str]:
    """The HTTP test server behind a bearer check answering 401 to any other token."""
    process, url = serve(tmp_path, 401)
    yield url
    process.terminate()
    process.wait(10)


def refusal(url: str) -> str:
    return f"401 Unauthorized from {url}: check TEST_MCP_AUTH (header Authorization)"


async def test_a_refused_token_is_named_in_the_reply_explain_and_mcp_list(
    client: Client,
    settings: Settings,
    task_queue: str,
    api: FakeModelAPI,
    tmp_path: Path,
    bearer_checked: str,
    dev_server: TemporalDevServer,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_MCP_AUTH", WRONG)
    agent = await stored(settings.require_database_url(), mcp_agent(tmp_path, bearer_checked))
    api.answer("Done without the web tools.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Anything")
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == TaskStatus.SUCCESS
    assert result.reply.startswith("The MCP server web was unavailable when this task started")
    assert refusal(bearer_checked) in result.reply, result.reply

    runner = CliRunner()
    env = {"OPENLOOP_TEMPORAL_ADDRESS": dev_server.address, "COLUMNS": "400"}
    explained = await asyncio.to_thread(runner.invoke, app, ["explain", handle.id], env=env)
    assert explained.exit_code == 0, explained.output
    assert "MCP server web unavailable" in explained.output
    assert refusal(bearer_checked) in explained.output, explained.output

    separator = "&" if "?" in pg_url else "?"
    db = {"OPENLOOP_DATABASE_URL": f"{pg_url}{separator}application_name=openloop-mcp-401", "COLUMNS": "400"}
    listed = await asyncio.to_thread(runner.invoke, app, ["mcp", "list", agent.name], env=db)
    assert listed.exit_code == 3, listed.output
    shown = f"web: unavailable: the MCP server web refused the request: {refusal(bearer_checked)}"
    assert shown in listed.output
    assert "notes: 4 allowed tool(s)" in listed.output  # the other server is unaffected
    for shown in (result.reply, explained.output, listed.output):
        assert "Server returned an error response" not in shown and WRONG not in shown


async def test_a_token_refused_at_call_time_is_told_to_the_model_and_not_retried(
    client: Client,
    settings: Settings,
    task_queue: str,
    api: FakeModelAPI,
    tmp_path: Path,
    bearer_checked: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_MCP_AUTH", SECRET)  # right at the start: the tools are listed
    agent = await stored(settings.require_database_url(), mcp_agent(tmp_path, bearer_checked))
    api.answer_tool_calls([tool_call("a", "web__read_note", {"name": "deploys"})], delay=1.5)
    api.answer("The web notes refused the token.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Read the web note")
        await eventually_async(lambda: len(api.requests) >= 1, "the first model call")
        monkeypatch.setenv("TEST_MCP_AUTH", WRONG)  # the token is rotated before the call
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == TaskStatus.SUCCESS
    reported = told(api, 1)["a"]
    assert reported.startswith("Error:") and refusal(bearer_checked) in reported, reported
    history = await handle.fetch_history()
    scheduled = {
        event.event_id: event.activity_task_scheduled_event_attributes
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
    }
    calls = [
        event.activity_task_started_event_attributes
        for event in history.events
        if event.HasField("activity_task_started_event_attributes")
        and scheduled[event.activity_task_started_event_attributes.scheduled_event_id].activity_type.name
        == ActivityName.MCP_CALL_TOOL
    ]
    assert [call.attempt for call in calls] == [1]  # a refusal is not retried
    [options] = [s for s in scheduled.values() if s.activity_type.name == ActivityName.MCP_CALL_TOOL]
    assert options.heartbeat_timeout.ToTimedelta() == MCP_CALL_OPTIONS["heartbeat_timeout"]
    [replayed] = await replay([history])
    assert replayed.ok, replayed.error


async def test_a_slow_mcp_call_heartbeats_at_half_its_heartbeat_timeout(
    db_settings: Settings, tmp_path: Path
) -> None:
    process, url = serve(tmp_path, None)
    try:
        server = McpServer.model_validate(
            {"name": "web", "transport": "streamable-http", "url": url, "allow": ["slow"]}
        )
        listed = await list_mcp_tools(McpListInput("task-slow", [server]))
        [spec] = listed.specs
        memory = MemoryScopeRef("ws", "mcp-test", "agent", "mcp-test", "offline/hashing-256", 30)
        context = SurfaceContext(surface="cli", channel="c", user="cli:test")
        key = f"slow-{uuid.uuid4().hex[:8]}"
        call = ToolCallInput(f"task-{key}", 1, "c1", "web.slow", {"seconds": 2.5}, key, context, memory, "x")
        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=1))
        beats: list[tuple[Any, ...]] = []
        env.on_heartbeat = lambda *details: beats.append(details)
        result = await env.run(call_mcp_tool, McpCallInput(call, server, "slow", spec.sha256))
    finally:
        process.terminate()
        process.wait(10)
    assert result.ok and "slept 2.5s" in result.output
    assert len(beats) >= 4, beats  # every half second while the tool ran for 2.5 s
    assert beats[0][0]["waiting_for"] == "web.slow"
    assert MCP_CALL_OPTIONS["heartbeat_timeout"] < MCP_CALL_OPTIONS["start_to_close_timeout"]
