"""What crosses the boundary for MCP tools: listing a task's servers at its start, and one call.

The server configs carry no secrets (only environment variable names), so they may ride in
history. The listed tools come back as the catalog's own `ToolSpec`s: no MCP SDK type ever
reaches a workflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from config.mcp import McpServer
from workflows.tool_call_types import ToolCallInput
from workflows.tool_catalog import ToolSpec


@dataclass
class McpListInput:
    """List each server's tools (filtered by its allow list), all servers at once."""

    task_id: str
    servers: list[McpServer]


@dataclass
class McpServerStatus:
    name: str
    ok: bool
    tools: int = 0
    problem: str = ""  # why it could not be listed (shown to people, never a secret)


@dataclass
class McpListResult:
    specs: list[ToolSpec] = field(default_factory=list)
    servers: list[McpServerStatus] = field(default_factory=list)


@dataclass
class McpCallInput:
    """One MCP tool call, with the schema digest the model saw (a changed schema is refused)."""

    call: ToolCallInput
    server: McpServer
    tool: str  # the server's own name for it (without the prefix)
    schema_sha256: str
