"""The specs of `agent.delegate` and `agent.ask_teammate`: declared once, pure data (the
workflow runs each as a child workflow; see `workflows.delegation`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from config.agent import AgentConfig
from workflows.tool_catalog import ToolRuns, ToolSpec
from workflows.types import SkillRef

DELEGATE_PERMISSION = "agents:delegate"
DELEGATE = ToolSpec(
    name="agent.delegate",
    description=(
        "Hand a self-contained piece of work to a subagent with a fresh context. Say everything "
        "it needs in `task`; it answers once, with what it found. Several calls in one answer "
        "run in parallel."
    ),
    parameters={
        "type": "object",
        "properties": {
            "task": {"type": "string", "minLength": 1, "description": "The work, self-contained"},
            "profile": {
                "type": "string",
                "minLength": 1,
                "description": (
                    "A preset: explore (reads and searches, changes nothing), plan (the same, "
                    "answers with a plan), code (the coding tools), or one your config defines"
                ),
            },
            "tools": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "Which of your tools it may use (default: the profile's, else all yours)",
            },
        },
        "required": ["task"],
        "additionalProperties": False,
    },
    permission=DELEGATE_PERMISSION,
    writes=False,
    runs=ToolRuns.CHILD,
    source="delegate",
)

ASK_PERMISSION = "agents:ask"
ASK_TEAMMATE = ToolSpec(
    name="agent.ask_teammate",
    description=(
        "Ask another agent of your team (named in your instructions) a question. It answers with "
        "its own tools, memory, budget and approvals; you get its answer."
    ),
    parameters={
        "type": "object",
        "properties": {
            "teammate": {"type": "string", "minLength": 1, "description": "The teammate agent's name"},
            "question": {"type": "string", "minLength": 1, "description": "Everything it needs to answer"},
        },
        "required": ["teammate", "question"],
        "additionalProperties": False,
    },
    permission=ASK_PERMISSION,
    writes=False,
    runs=ToolRuns.CHILD,
    source="teammate",
)


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
