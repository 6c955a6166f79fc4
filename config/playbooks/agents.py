"""What the compiler needs to know of an agent: which of its tools write, and which of those
an approval already covers.

Config does not import the tool catalog, so the caller says which tools write and which
always wait for a person (`activities.tools.catalog`: `spec.writes`, `spec.always_gated`);
`agent_writes` combines that with the agent's grants and `approvals.require_for`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from config.agent import AgentConfig

__all__ = ["AgentWrites", "agent_writes"]


@dataclass(frozen=True)
class AgentWrites:
    name: str
    writes: frozenset[str] = frozenset()  # granted tools that write
    gated: frozenset[str] = frozenset()  # of those, the ones that wait for an approval anyway

    @property
    def ungated(self) -> list[str]:
        return sorted(self.writes - self.gated)


def agent_writes(config: AgentConfig, writing: Collection[str], always_gated: Collection[str]) -> AgentWrites:
    """`config`'s writing tools; `writing` and `always_gated` are tool names from the catalog."""
    granted = {grant.name for grant in config.spec.tools}
    writes = granted & set(writing)
    gated = writes & (set(config.spec.approvals.require_for) | set(always_gated))
    return AgentWrites(config.name, frozenset(writes), frozenset(gated))
