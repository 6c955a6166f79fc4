"""The MCP gateway: a server's allowed tools as catalog specs, and one checked call.

Every listed tool becomes the catalog's own `ToolSpec` (name `server.tool`, description,
canonical JSON schema and its sha256), so no SDK type reaches a workflow. A call first lists
the tool again: a schema that changed since the task started is refused, since the model
built its arguments for the old one. Tool errors (`isError`) are results the model hears
about; the idempotency key rides in the call's `_meta`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp import Client

from activities.mcp.client import connect
from activities.tool_errors import ToolErrorKind
from config.mcp import McpServer
from workflows.tool_catalog import ToolRuns, ToolSpec, canonical_schema, schema_sha256
from workflows.types import ToolCallResult

log = logging.getLogger(__name__)

IDEMPOTENCY_META = "openloop/idempotency_key"
MAX_PAGES = 20
MAX_DESCRIPTION = 1024
MODEL_NAME_LIMIT = 64  # providers cap a function name's length


async def allowed_specs(server: McpServer) -> list[ToolSpec]:
    """The server's tools its allow list names, as specs."""
    async with connect(server) as client:
        tools = await _listing(client)
    specs = []
    for tool in tools:
        if not server.allows(tool.name):
            continue
        name = f"{server.name}.{tool.name}"
        if "__" in tool.name or len(name) + 1 > MODEL_NAME_LIMIT:
            log.warning("MCP tool %s is left out: its name cannot be given to a model", name)
            continue
        specs.append(spec_of(server, tool.name, tool.description or "", tool.input_schema))
    return specs


def spec_of(server: McpServer, tool: str, description: str, schema: dict[str, Any]) -> ToolSpec:
    return ToolSpec(
        name=f"{server.name}.{tool}",
        description=description[:MAX_DESCRIPTION],
        parameters=dict(canonical_schema(schema)),
        permission=f"mcp:{server.name}",
        writes=server.is_write(tool),
        runs=ToolRuns.MCP,
        source=f"mcp:{server.name}",
    )


async def call(
    server: McpServer, tool: str, arguments: dict[str, Any], key: str, schema_sha: str
) -> ToolCallResult:
    """Call `tool` once, if its schema is still the one the model saw."""
    async with connect(server) as client:
        current = next((t for t in await _listing(client) if t.name == tool), None)
        if current is None:
            return _refused(
                ToolErrorKind.NOT_FOUND, f"{server.name}.{tool} is no longer offered by its server"
            )
        if schema_sha256(canonical_schema(current.input_schema)) != schema_sha:
            return _refused(
                ToolErrorKind.INVALID,
                f"the schema of {server.name}.{tool} changed since this task started, so the call was not "
                "made; a new task will see the new schema",
            )
        meta: Any = {IDEMPOTENCY_META: key}  # RequestParamsMeta takes extra keys
        result = await client.call_tool(tool, arguments, meta=meta)
    text = _text(result.content, result.structured_content)
    if result.is_error:
        return _refused(ToolErrorKind.FAILED, text)
    return ToolCallResult(ok=True, output=text)


async def _listing(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _text(content: list[Any], structured: Any) -> str:
    parts = [str(getattr(block, "text", "")) for block in content if getattr(block, "type", "") == "text"]
    others = [block.type for block in content if getattr(block, "type", "") != "text"]
    if others:
        parts.append(f"[{len(others)} non-text part(s): {', '.join(sorted(set(others)))}]")
    if structured is not None and not parts:
        parts.append(json.dumps(structured, sort_keys=True, ensure_ascii=False))
    return "\n".join(parts) or "(no output)"


def _refused(kind: ToolErrorKind, message: str) -> ToolCallResult:
    return ToolCallResult(ok=False, output=f"Error ({kind}): {message}", error_kind=kind.value)
