"""The MCP activities: list a task's servers at its start, and call one tool.

Listing runs the servers at once (up to `PARALLEL_LISTINGS`), each from the worker's reused
listing while it is fresh, and reports each one's failure in the result (a task goes on
without a server that is down, unless the agent marks it required). A call returns the
recorded result when a retried attempt finds the first one's, so a write whose answer was
recorded is not sent twice; its output is bounded and audited like a native tool's. A call
heartbeats while it waits for the server, so one whose worker died is retried soon.
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace
from temporalio import activity

from activities.heartbeats import beating
from activities.mcp import gateway
from activities.mcp.client import describe
from activities.runtime import runtime
from activities.store import task_tools
from activities.store.tool_calls import bound_and_audit, record_tool_span_attributes
from config.mcp import McpServer
from workflows.mcp_types import McpCallInput, McpListInput, McpListResult, McpServerStatus
from workflows.tool_catalog import ToolSpec
from workflows.types import ActivityName, ToolCallResult

LIST_GRACE_SECONDS = 5.0  # beyond a server's own timeout, for connecting and closing
PARALLEL_LISTINGS = 16  # servers listed at once by one activity


@activity.defn(name=ActivityName.MCP_LIST_TOOLS)
async def list_mcp_tools(inp: McpListInput) -> McpListResult:
    bound = asyncio.Semaphore(PARALLEL_LISTINGS)

    async def bounded(server: McpServer) -> tuple[list[ToolSpec], McpServerStatus]:
        async with bound:
            return await _list_one(server)

    # A listing still within its TTL is taken at once; only the other servers are asked.
    reused = [gateway.reused_specs(server) for server in inp.servers]
    asked = [server for server, specs in zip(inp.servers, reused, strict=True) if specs is None]
    async with beating("listing MCP tools"):
        answers = iter(await asyncio.gather(*(bounded(server) for server in asked)))
    listed = [
        next(answers) if specs is None else _listed(server, specs)
        for server, specs in zip(inp.servers, reused, strict=True)
    ]
    result = McpListResult()
    for specs, status in listed:
        result.specs += specs
        result.servers.append(status)
    await task_tools.save_specs(await runtime().pool(), inp.task_id, result.specs)
    return result


async def _list_one(server: McpServer) -> tuple[list[ToolSpec], McpServerStatus]:
    try:
        async with asyncio.timeout(server.timeout_seconds + LIST_GRACE_SECONDS):
            specs = await gateway.allowed_specs(server)
    except Exception as err:  # each server's own failure, reported, never the whole listing's
        return [], McpServerStatus(server.name, ok=False, problem=describe(err))
    return _listed(server, specs)


def _listed(server: McpServer, specs: list[ToolSpec]) -> tuple[list[ToolSpec], McpServerStatus]:
    return specs, McpServerStatus(server.name, ok=True, tools=len(specs))


@activity.defn(name=ActivityName.MCP_CALL_TOOL)
async def call_mcp_tool(inp: McpCallInput) -> ToolCallResult:
    call = inp.call
    pool = await runtime().pool()
    recorded = await task_tools.recorded_result(pool, call.idempotency_key)
    if recorded is not None:
        return recorded
    with trace.get_tracer(__name__).start_as_current_span(f"RunTool:{call.tool}") as span:
        async with beating(call.tool):
            result = await gateway.call(
                inp.server, inp.tool, dict(call.arguments), call.idempotency_key, inp.schema_sha256
            )
        async with pool.connection() as conn:
            bounded = await bound_and_audit(conn, call, result)
        record_tool_span_attributes(span, call, bounded)
    await task_tools.record_result(pool, call.idempotency_key, call.task_id, bounded)
    return bounded
