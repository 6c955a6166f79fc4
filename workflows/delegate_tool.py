"""What crosses the boundary for `agent.delegate` and `agent.ask_teammate` (declared in
`workflows.tools.agents`, run as child workflows by `workflows.delegation`): a teammate's
lookup and start, and a child's signal that it waits for an approval. Pure data."""

from __future__ import annotations

from dataclasses import dataclass, field

from config.agent import AgentConfig
from workflows.tool_catalog import ToolSpec
from workflows.types import SkillRef


@dataclass
class TeammateLookup:
    """Find the teammate's applied agent, and what its task starts with."""

    teammate: str
    workspace: str


@dataclass
class TeammateStart:
    agent: AgentConfig
    version: int
    tools: list[ToolSpec]
    skills: list[SkillRef] = field(default_factory=list)


CHILD_WAITING_SIGNAL = "child_waiting"


@dataclass
class ChildWait:
    """A child task tells its parent it waits for an approval (`tool` set) or no longer does
    (`tool` empty), so the parent's status says what the tree is waiting on."""

    child_id: str
    tool: str = ""
    approvers: list[str] = field(default_factory=list)
