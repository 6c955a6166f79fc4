"""MCP tools end to end: real MCP servers (the SDK's own server API, over stdio and over
streamable HTTP on 127.0.0.1), the real worker and activities on the Temporal dev server,
Postgres, and LiteLLM talking to a fake provider."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment
from typer.testing import CliRunner

from activities.mcp.mcp_activities import call_mcp_tool, list_mcp_tools
from config.mcp import McpServer
from config.settings import Settings
from surfaces.cli.main import app
from tests.fakes.mcp_servers import start_http
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import approve_when_pending, eventually_async
from tests.integration.mcp_env import SECRET, mcp_agent, servers, told
from tests.reliability.harness import scalar, start, stored
from workers.embedded import free_port
from workers.worker import build_worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.mcp_types import McpCallInput, McpListInput
from workflows.types import MemoryScopeRef, SurfaceContext, TaskStatus, ToolCallInput


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def http_server(state: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The streamable-HTTP test server; its URL. The header it expects comes from the env."""
    port = free_port()
    monkeypatch.setenv("TEST_MCP_AUTH", SECRET)
    process = start_http(state, port, SECRET)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)


def calls_made(state: Path) -> list[str]:
    log = state / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


async def test_a_task_reads_from_both_servers_and_writes_once_after_approval(
    client: Client, settings: Settings, task_queue: str, api: FakeModelAPI, state: Path, http_server: str
) -> None:
    agent = await stored(settings.require_database_url(), mcp_agent(state, http_server))
    api.answer_tool_calls(
        [
            tool_call("a", "notes__read_note", {"name": "deploys"}),
            tool_call("b", "web__whoami", {}),
            tool_call("c", "web__create_note", {"title": "not allowed"}),
        ]
    )
    api.answer_tool_calls([tool_call("d", "notes__create_note", {"title": "Deploy on Tuesdays"})])
    api.answer("Noted: deploys happen on Tuesdays.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Read the deploy note and save it")
        pending = await approve_when_pending(handle)
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert pending.tool == "notes.create_note" and pending.arguments == {"title": "Deploy on Tuesdays"}
    offered = {tool["function"]["name"] for tool in api.requests[0].body["tools"]}
    assert {"notes__read_note", "notes__create_note", "web__whoami", "web__read_note"} <= offered
    assert "web__create_note" not in offered and "notes__slow" not in offered  # not allowed
    first = told(api, 1)
    assert "deploys happen on Tuesdays" in first["a"]
    assert first["b"] == "authorized"  # the header came from the worker's environment
    assert "unknown tool 'web.create_note'" in first["c"]
    assert "Created note #1" in told(api, 2)["d"]
    assert calls_made(state) == ["Deploy on Tuesdays"]  # once
    history = (await handle.fetch_history()).to_json()
    assert SECRET not in history and "s3cret" not in history
    url = settings.require_database_url()
    audited = [
        ("tool_call", "notes.read_note"),
        ("tool_refused", "web.create_note"),
        ("approval_approved", "notes.create_note"),
        ("tool_call", "notes.create_note"),
    ]
    for kind, tool in audited:
        query = "SELECT count(*) FROM audit_log WHERE task_id = %s AND kind = %s AND tool = %s"
        assert await scalar(url, query, handle.id, kind, tool) >= 1, (kind, tool)


async def test_a_changed_schema_is_refused_and_an_error_result_reaches_the_model(
    client: Client, settings: Settings, task_queue: str, api: FakeModelAPI, state: Path, http_server: str
) -> None:
    agent = await stored(settings.require_database_url(), mcp_agent(state, http_server))
    api.answer_tool_calls([tool_call("a", "notes__fail", {})])
    # The model takes a moment to ask for shape: its schema changes meanwhile (below).
    api.answer_tool_calls([tool_call("b", "notes__shape", {"x": 1})], delay=1.5)
    api.answer("Both failed.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Try the tools")
        # Once the first call is answered, the server's schema changes under the task.
        await eventually_async(lambda: len(api.requests) >= 2, "the model's second request")
        (state / "flipped").touch()
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == TaskStatus.SUCCESS
    assert told(api, 1)["a"].startswith("Error (failed)")
    assert "the schema of notes.shape changed since this task started" in told(api, 2)["b"]


async def test_a_server_down_at_the_start_is_reported_and_the_task_goes_on(
    client: Client, settings: Settings, task_queue: str, api: FakeModelAPI, state: Path
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/mcp"
    agent = await stored(settings.require_database_url(), mcp_agent(state, closed))
    api.answer("Done without the web tools.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Anything")
        result = await asyncio.wait_for(handle.result(), 60)
        explained = await handle.query(AgentTaskWorkflow.explain)
    assert result.status == TaskStatus.SUCCESS
    assert result.reply.startswith("The MCP server web was unavailable when this task started")
    assert any("MCP server web was unavailable" in d for d in explained.decisions)
    offered = {tool["function"]["name"] for tool in api.requests[0].body["tools"]}
    assert "notes__read_note" in offered and not any(name.startswith("web__") for name in offered)

    required = await stored(settings.require_database_url(), mcp_agent(state, closed, required=True))
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, required, "Anything")
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == TaskStatus.ERROR and "required MCP server web is unavailable" in result.reason


def call_input(state: Path, tool: str, arguments: dict[str, Any], key: str, sha: str) -> McpCallInput:
    server = McpServer.model_validate(servers(state, "http://127.0.0.1:1/mcp")[0])
    memory = MemoryScopeRef("ws", "mcp-test", "agent", "mcp-test", "offline/hashing-256", 30)
    context = SurfaceContext(surface="cli", channel="c", user="cli:test")
    call = ToolCallInput(
        f"task-{key}", 1, "call-1", f"notes.{tool}", arguments, key, context, memory, "cli:test"
    )
    return McpCallInput(call, server, tool, sha)


async def test_a_retried_call_whose_answer_was_recorded_is_not_sent_again(
    db_settings: Settings, state: Path
) -> None:
    server = McpServer.model_validate(servers(state, "http://127.0.0.1:1/mcp")[0])
    listed = await list_mcp_tools(McpListInput("task-listing", [server]))
    sha = next(spec.sha256 for spec in listed.specs if spec.name == "notes.create_note")
    inp = call_input(state, "create_note", {"title": "Once"}, f"key-{uuid.uuid4().hex[:8]}", sha)
    env = ActivityEnvironment()
    first = await env.run(call_mcp_tool, inp)
    again = await env.run(call_mcp_tool, inp)  # a retry after the first attempt's answer was recorded
    assert first.ok and again == first
    assert calls_made(state) == ["Once"]


def test_mcp_list_and_call_from_the_command_line(pg_url: str, state: Path, http_server: str) -> None:
    config = mcp_agent(state, http_server)
    agent_file = state / "agent.yaml"
    agent_file.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    separator = "&" if "?" in pg_url else "?"
    env = {
        "OPENLOOP_DATABASE_URL": f"{pg_url}{separator}application_name=openloop-mcp-cli-test",
        "COLUMNS": "200",
        "TEST_MCP_AUTH": SECRET,
    }
    runner = CliRunner()

    def openloop(*args: str) -> Any:
        return runner.invoke(app, list(args), env=env)

    applied = openloop("agents", "apply", "-f", str(agent_file))
    assert applied.exit_code == 0, applied.output
    listed = openloop("mcp", "list", config.name, "--schemas")
    assert listed.exit_code == 0, listed.output
    assert "notes: 4 allowed tool(s)" in listed.output and "web: 2 allowed tool(s)" in listed.output
    assert "notes.read_note" in listed.output and "web.whoami" in listed.output
    assert "notes.slow" not in listed.output  # not on the allow list
    called = openloop("mcp", "call", config.name, "web.whoami")
    assert called.exit_code == 0 and called.output.strip() == "authorized", called.output
    title = '{"title": "x"}'
    refused = openloop("mcp", "call", config.name, "notes.create_note", "--args", title)
    assert refused.exit_code == 1 and "add --yes" in refused.output and calls_made(state) == []
    written = openloop("mcp", "call", config.name, "notes.create_note", "--args", title, "--yes")
    assert written.exit_code == 0 and calls_made(state) == ["x"], written.output


async def test_a_server_that_goes_away_mid_task_is_retried_then_reported(
    client: Client, settings: Settings, task_queue: str, api: FakeModelAPI, state: Path, http_server: str
) -> None:
    agent = await stored(settings.require_database_url(), mcp_agent(state, http_server))
    # The model takes a moment to answer: the server goes away between the listing and the call.
    api.answer_tool_calls([tool_call("a", "web__read_note", {"name": "deploys"})], delay=1.5)
    api.answer("The web notes are down; try later.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Read the web note")
        await eventually_async(lambda: len(api.requests) >= 1, "the first model call")
        stop = await asyncio.create_subprocess_exec("pkill", "-f", f"mcp_servers http {state}")
        await stop.wait()
        result = await asyncio.wait_for(handle.result(), 120)
    assert result.status == TaskStatus.SUCCESS
    reported = told(api, 1)["a"]
    assert reported.startswith("Error:") and "the MCP server web could not be reached" in reported
    history = await handle.fetch_history()
    attempts = [
        event.activity_task_started_event_attributes.attempt
        for event in history.events
        if event.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) > 1  # retried with backoff before the task heard of it
