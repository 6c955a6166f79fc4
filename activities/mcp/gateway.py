"""The MCP gateway: a server's allowed tools as catalog specs, and one checked call.

Every listed tool becomes the catalog's own `ToolSpec` (name `server.tool`, description,
canonical JSON schema and its sha256), so no SDK type reaches a workflow. Requests go over
the worker's cached session to the server (`activities.mcp.sessions`), and the listing is
reused for a while (`activities.mcp.listings`). A call first checks the tool's schema against
that listing (a write: against a fresh one), listing afresh when it does not match: a schema
that changed since the task started is refused, since the model built its arguments for the
old one. Tool errors (`isError`) are results the model hears about; after one, the tools are
listed afresh, so a schema that changed under a reused listing is told as such. The
idempotency key rides in the call's `_meta`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp import Client

from activities.mcp.listings import listings
from activities.mcp.sessions import sessions
from activities.tool_errors import ToolErrorKind
from config.mcp import McpServer
from workflows.tool_catalog import ToolRuns, ToolSpec, canonical_schema, schema_sha256
from workflows.types import ToolCallResult

log = logging.getLogger(__name__)

IDEMPOTENCY_META = "openloop/idempotency_key"
MAX_DESCRIPTION = 1024
MODEL_NAME_LIMIT = 64  # providers cap a function name's length
MAX_BUILT = 256  # listings whose specs are kept


async def allowed_specs(server: McpServer) -> list[ToolSpec]:
    """The server's tools its allow list names, as specs (built once per reused listing)."""
    tools, _ = await listings().tools(server)
    return _specs_of_listing(server, tools)


def reused_specs(server: McpServer) -> list[ToolSpec] | None:
    """`allowed_specs` from a listing still within its TTL, at once; None when it must be listed
    (or cannot be looked up: listing it then reports why, as the server's own problem)."""
    try:
        tools = listings().reused(server)
    except Exception:  # noqa: BLE001 - e.g. a credential not set: `allowed_specs` says so
        return None
    return None if tools is None else _specs_of_listing(server, tools)


def _specs_of_listing(server: McpServer, tools: list[Any]) -> list[ToolSpec]:
    config = server.model_dump_json()
    built = _built.pop((id(tools), config), None)
    if built is not None and built[0] is tools:
        _built[id(tools), config] = built  # most recently used last: evicted last
        return list(built[1])
    specs = _specs(server, tools)
    _built[id(tools), config] = (tools, specs)
    while len(_built) > MAX_BUILT:
        _built.pop(next(iter(_built)))
    return list(specs)


_built: dict[tuple[int, str], tuple[list[Any], list[ToolSpec]]] = {}  # least recently used first


def _specs(server: McpServer, tools: list[Any]) -> list[ToolSpec]:
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
    """Call `tool` once, if its schema is still the one the model saw: a read checked against
    the reused listing, a write (approved for arguments of that schema) against a fresh one."""
    writes = server.is_write(tool)
    tools, reused = await listings().tools(server, refresh=writes)
    current = _current(tools, tool)
    if reused and (current is None or _sha(current) != schema_sha):
        tools, reused = await listings().tools(server, refresh=True)  # out of date, or really changed
        current = _current(tools, tool)
    if current is None:
        return _refused(ToolErrorKind.NOT_FOUND, f"{server.name}.{tool} is no longer offered by its server")
    if _sha(current) != schema_sha:
        return _schema_changed(server, tool, "so the call was not made")
    meta: Any = {IDEMPOTENCY_META: key}  # RequestParamsMeta takes extra keys

    async def send(client: Client) -> Any:
        return await client.call_tool(tool, arguments, meta=meta)

    try:
        result = await sessions().run(server, send, repeatable=not writes)
    except Exception:
        listings().forget(server)
        raise
    text = _text(result.content, result.structured_content)
    if not result.is_error:
        return ToolCallResult(ok=True, output=text)
    if reused:  # the server may have refused arguments built for a schema it no longer has
        try:
            tools, _ = await listings().tools(server, refresh=True)
        except Exception:  # the server's own answer stands
            tools = [current]
        now = _current(tools, tool)
        if now is None or _sha(now) != schema_sha:
            refusal = f"and the server refused the call made for the old one ({text})"
            return _schema_changed(server, tool, refusal)
    return _refused(ToolErrorKind.FAILED, text)


def _schema_changed(server: McpServer, tool: str, what_happened: str) -> ToolCallResult:
    return _refused(
        ToolErrorKind.INVALID,
        f"the schema of {server.name}.{tool} changed since this task started, {what_happened}; "
        "a new task will see the new schema",
    )


def _current(tools: list[Any], name: str) -> Any:
    return next((t for t in tools if t.name == name), None)


def _sha(tool: Any) -> str:
    return schema_sha256(canonical_schema(tool.input_schema))


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
