"""The tree of tasks a task starts: subagents and teammates share one ancestry and one bound.

Every task carries the agents of the tasks above it (`TaskInput.ancestors`, the root's
first; a subagent repeats its parent's), so three rules hold whatever path the tree takes:

- no agent is asked by a task below it: a question to oneself or to an agent that (perhaps
  through others) asked this one is refused, naming the cycle (`a -> b -> a`);
- depth counts both kinds: no task starts more than `TREE_DEPTH` levels below the root, and
  each child's `spec.subagents.max_depth` is clamped to what the tree has left, so a child at
  the limit is offered neither `agent.delegate` nor `agent.ask_teammate`;
- a child's per-task budget is carved out of what its asker has left (a teammate keeps its
  own ceiling when that is lower) and its spend is charged back, so the tree never spends
  past the root's ceiling.

Pure functions; workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from config.agent import AgentConfig
from config.subagents import TREE_DEPTH, SubagentsSpec
from workflows.delegate_tool import TeammateStart
from workflows.policy import ToolCheck
from workflows.tool_catalog import ToolSpec
from workflows.tools import starts_task
from workflows.types import TaskInput

__all__ = [
    "TREE_DEPTH",
    "carved_agent",
    "clamped",
    "cycle_refusal",
    "depth_left",
    "depth_refusal",
    "lineage",
    "offered",
    "past_depth",
    "teammate_input",
]


def lineage(inp: TaskInput) -> list[str]:
    """The ancestors of a child of this task: this task's, then its own agent."""
    return [*inp.ancestors, inp.agent.name]


def depth_left(inp: TaskInput) -> bool:
    """May this task start a child (subagent or teammate)?"""
    return inp.agent.spec.subagents.max_depth >= 1 and len(inp.ancestors) < TREE_DEPTH


def depth_refusal(inp: TaskInput, tool: str) -> str:
    """What the model hears when it asks for a child past the limit."""
    return (
        f"{tool} is refused: this task is {len(inp.ancestors)} level(s) below the task that started "
        f"its tree, at the depth limit (spec.subagents.max_depth; subagents and teammates together "
        f"go at most {TREE_DEPTH} levels deep): do this work yourself"
    )


def cycle_refusal(inp: TaskInput, teammate: str) -> str | None:
    """Why asking `teammate` is refused when it would close a cycle (`a -> b -> a`), or None."""
    path = lineage(inp)
    if teammate not in path:
        return None
    agents = [name for index, name in enumerate(path) if index == 0 or path[index - 1] != name]
    closes = " -> ".join([*agents[agents.index(teammate) :], teammate])
    return (
        f"asking {teammate!r} would close a cycle ({closes}): no agent asks itself or an agent "
        "that asked it; answer with what you have"
    )


def clamped(subagents: SubagentsSpec, depth: int) -> SubagentsSpec:
    """A child `depth` levels below the root delegates no deeper than the tree allows."""
    most = max(0, min(subagents.max_depth, TREE_DEPTH - depth))
    return subagents.model_copy(update={"max_depth": most})


def offered(tools: list[ToolSpec], subagents: SubagentsSpec) -> list[ToolSpec]:
    """A child at the depth limit is not offered the tools that would start another."""
    if subagents.max_depth >= 1:
        return tools
    return [spec for spec in tools if not starts_task(spec.name)]


def past_depth(check: ToolCheck, inp: TaskInput, tool: str, had: list[str]) -> ToolCheck:
    """A call to a tool that starts a child, which the task's agent has but this task was not
    given because of its depth: the depth refusal, not "unknown tool"."""
    asks = starts_task(tool) and tool in had
    if check.kind != "unknown" or not asks or depth_left(inp):
        return check
    return ToolCheck(False, None, check.arguments, depth_refusal(inp, tool), "not_allowed")


def with_mcp_narrowed(agent: AgentConfig, tools: list[ToolSpec]) -> AgentConfig:
    """The agent with each MCP server allowed exactly its tools in `tools` (a subagent's,
    narrowed by its profile or the call): the child lists its servers itself at its start,
    and must not get back what the narrowing took away. A server left with none is dropped."""
    allowed: dict[str, list[str]] = {}
    for spec in tools:
        if spec.mcp_server is not None:
            allowed.setdefault(spec.mcp_server, []).append(spec.name.split(".", 1)[1])
    servers = [
        server.model_copy(update={"allow": allowed[server.name]})
        for server in agent.spec.mcp_servers
        if server.name in allowed
    ]
    return agent.model_copy(update={"spec": agent.spec.model_copy(update={"mcp_servers": servers})})


def carved_agent(agent: AgentConfig, usd: float, tokens: int) -> AgentConfig:
    """The agent with a child's slice of the budget as its per-task ceiling."""
    spec = agent.spec
    budget = spec.budget.model_copy(update={"per_task_usd": usd})
    limits = spec.limits.model_copy(update={"token_limit": tokens})
    return agent.model_copy(update={"spec": spec.model_copy(update={"budget": budget, "limits": limits})})


def teammate_input(
    inp: TaskInput, found: TeammateStart, task_id: str, request: str, left: tuple[float, int]
) -> TaskInput:
    """A teammate's task below `inp`: its own agent with its ceiling lowered to what the asker
    has `left` (dollars, tokens), its depth clamped to the tree's."""
    own, (usd, tokens) = found.agent, left
    agent = carved_agent(
        own, min(usd, own.spec.budget.per_task_usd), max(1, min(tokens, own.spec.limits.token_limit))
    )
    subagents = clamped(agent.spec.subagents, len(inp.ancestors) + 1)
    return TaskInput(
        task_id=task_id,
        agent=agent.model_copy(update={"spec": agent.spec.model_copy(update={"subagents": subagents})}),
        agent_version=found.version,
        context=inp.context,
        request=request,
        tools=offered(found.tools, subagents),
        skills=found.skills,
        parent=inp.task_id,
        ancestors=lineage(inp),
    )
