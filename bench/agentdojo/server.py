"""An AgentDojo suite as an MCP server: the official SDK's low-level server API over
streamable HTTP, in the bench process (uvicorn on 127.0.0.1), each tool one of the suite's
functions run against the environment of the case its request names (`X-Bench-Case`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from bench.agentdojo import suites
from bench.agentdojo.play import CASE_HEADER, PLAYS, carries
from bench.agentdojo.suites import Call
from workers.embedded import free_port

START_SECONDS = 30.0


def tool_list(name: str) -> list[types.Tool]:
    return [
        types.Tool(name=f.name, description=f.description, input_schema=f.parameters.model_json_schema())
        for f in suites.suite(name).tools
    ]


def build(name: str) -> Server[Any]:
    tools = tool_list(name)
    functions = suites.runtime(name)

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        headers = getattr(ctx.request, "headers", None) or {}
        play = PLAYS.get(headers.get(CASE_HEADER.lower(), ""))
        if play is None:
            return _text("Error: this request names no running bench case", error=True)
        arguments = json.loads(json.dumps(params.arguments or {}, default=str))
        result, error = functions.run_function(play.env, params.name, arguments)
        text = suites.output_text(result, error)
        play.served.append(Call(params.name, arguments))
        if carries(text, play.goal):
            play.injection_returned = True
        return _text(text, error=error is not None)

    return Server(f"agentdojo-{name}", on_list_tools=list_tools, on_call_tool=call_tool)


async def _started(server: uvicorn.Server) -> None:
    for _ in range(int(START_SECONDS / 0.05)):
        if server.started:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"an AgentDojo MCP server did not start within {START_SECONDS:g} s")


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


@contextlib.asynccontextmanager
async def serving(names: list[str]) -> AsyncIterator[dict[str, str]]:
    """Each suite's server on a port of its own, in this event loop; suite -> URL."""
    servers: list[tuple[uvicorn.Server, asyncio.Task[None]]] = []
    urls: dict[str, str] = {}
    try:
        for name in names:
            port = free_port()
            app = build(name).streamable_http_app(stateless_http=True)
            config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
            server = uvicorn.Server(config)
            servers.append((server, asyncio.create_task(server.serve())))
            await _started(server)
            urls[name] = f"http://127.0.0.1:{port}/mcp"
        yield urls
    finally:
        for server, task in servers:
            server.should_exit = True
            with contextlib.suppress(Exception):
                await task
