"""What the compiler needs to know of an agent: which of its tools write, and which of those
an approval already covers.

Config does not import the tool catalog, so the caller says which tools write and which
always wait for a person (`activities.tools.catalog`: `spec.writes`, `spec.always_gated`);
`agent_writes` combines that with the agent's grants, its MCP servers' `writes` (listed at a
task's start, so known here only by name or glob, `server.tool`) and `approvals.require_for`,
read the way the task's approval gate reads it (`workflows.policy.needs_approval`: globs).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection
from dataclasses import dataclass

from config.agent import AgentConfig

__all__ = ["AgentWrites", "agent_writes", "mcp_write_rules"]


@dataclass(frozen=True)
class AgentWrites:
    name: str
    writes: frozenset[str] = frozenset()  # granted tools that write, MCP ones as `server.glob`
    gated: frozenset[str] = frozenset()  # of those, the ones that wait for an approval anyway

    @property
    def ungated(self) -> list[str]:
        return sorted(self.writes - self.gated)


def mcp_write_rules(config: AgentConfig) -> list[str]:
    """The agent's MCP write tools as approval rules (`notes.create_note`, `linear.create_*`):
    in `require_for` they gate exactly the listed tools the server's `writes` names."""
    return sorted(
        {f"{server.name}.{pattern}" for server in config.spec.mcp_servers for pattern in server.writes}
    )


def _covered(tool: str, rules: Collection[str]) -> bool:
    """A rule covers the tool (or, for an MCP glob, every tool the glob names)."""
    return any(tool == rule or fnmatch.fnmatchcase(tool, rule) for rule in rules)


def agent_writes(config: AgentConfig, writing: Collection[str], always_gated: Collection[str]) -> AgentWrites:
    """`config`'s writing tools; `writing` and `always_gated` are tool names from the catalog."""
    granted = {grant.name for grant in config.spec.tools}
    writes = (granted & set(writing)) | set(mcp_write_rules(config))
    rules = config.spec.approvals.require_for
    gated = {tool for tool in writes if tool in always_gated or _covered(tool, rules)}
    return AgentWrites(config.name, frozenset(writes), frozenset(gated))
