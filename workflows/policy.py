"""Pure policy decisions of a task: which tools it may call, which need approval, who may
approve, and the action id that binds a decision to exact arguments.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import jsonschema

from config.agent import AgentConfig
from workflows.tool_catalog import ToolSpec, WriteBound
from workflows.types import MemoryScopeRef, SkillRef, SurfaceContext

MAX_INVALID_TOOL_CALLS_IN_A_ROW = 3


def action_id(tool: str, arguments: dict[str, Any]) -> str:
    """A decision is bound to this: the tool name and its exact, canonical arguments."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{tool}\n{canonical}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ToolCheck:
    allowed: bool
    definition: ToolSpec | None
    arguments: dict[str, Any]
    problem: str = ""  # told to the model when not allowed or invalid
    kind: str = ""  # invalid | not_allowed | unknown


def check_tool_call(
    agent: AgentConfig, definition: ToolSpec | None, name: str, raw_arguments: str
) -> ToolCheck:
    """Parse and validate a model's tool call against its spec and the agent's config."""
    granted = agent.spec.tool(name)
    if definition is None:
        known = ", ".join(t.name for t in agent.spec.tools) or "none"
        return ToolCheck(False, None, {}, f"unknown tool {name!r}; tools you have: {known}", "unknown")
    if definition.mcp_server is not None:
        # An MCP tool is in the task's specs only because its server's allow list named it.
        if agent.spec.mcp_server(definition.mcp_server) is None:
            return ToolCheck(
                False, definition, {}, f"tool {name!r} is not enabled for this agent", "not_allowed"
            )
    elif not definition.native:
        pass  # the workflow's own: in the task's specs only as granted (or with its skills)
    elif granted is None:
        return ToolCheck(False, definition, {}, f"tool {name!r} is not enabled for this agent", "not_allowed")
    elif definition.permission not in granted.permissions:
        return ToolCheck(
            False,
            definition,
            {},
            f"tool {name!r} needs permission {definition.permission!r}, which this agent was not granted",
            "not_allowed",
        )
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as exc:
        return ToolCheck(False, definition, {}, f"arguments are not valid JSON: {exc.msg}", "invalid")
    if not isinstance(arguments, dict):
        return ToolCheck(False, definition, {}, "arguments must be a JSON object", "invalid")
    errors = sorted(
        jsonschema.Draft202012Validator(definition.parameters).iter_errors(arguments),
        key=lambda e: list(e.path),
    )
    if errors:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e.path) or '(arguments)'}: {e.message}" for e in errors[:5]
        )
        return ToolCheck(False, definition, arguments, f"invalid arguments: {detail}", "invalid")
    return ToolCheck(True, definition, arguments)


def taken_by_skill(
    check: ToolCheck, name: str, had: list[str], skills: list[SkillRef], offered: list[str]
) -> ToolCheck:
    """An unknown tool the agent had (`had`: granted, or in the specs its task started with)
    was taken away by a loaded skill's `allowed-tools` (in this run or one before it): say
    that, and what is left, rather than that the tool does not exist."""
    narrowing = [  # a skill that excludes it, and whose narrowing shows in what is offered
        skill.name
        for skill in skills
        if skill.allowed_tools
        and name not in skill.allowed_tools
        and all(tool in skill.allowed_tools or tool.startswith("skill.") for tool in offered)
    ]
    if check.kind != "unknown" or name not in had or not narrowing:
        return check
    problem = (
        f"tool {name!r} is not available: the allowed-tools of the loaded skill "
        f"{', '.join(narrowing)} excludes it; tools you still have: {', '.join(offered) or 'none'}"
    )
    return ToolCheck(False, None, check.arguments, problem, "not_allowed")


MAX_PROPOSALS = 5  # approvals voided by a changed workspace before a pull request gives up


def needs_approval(agent: AgentConfig, tool: str) -> bool:
    """Named in approvals.require_for, by name or by a glob such as `fs.*`."""
    return any(fnmatch.fnmatchcase(tool, rule) for rule in agent.spec.approvals.require_for)


def may_approve(agent: AgentConfig, approver: str) -> bool:
    return approver in agent.spec.approvals.approvers


def progress_signature(tool: str, arguments: dict[str, Any], result: str) -> str:
    """Same tool, same arguments, same result: a repeat that makes no progress."""
    return hashlib.sha256(f"{action_id(tool, arguments)}\n{result}".encode()).hexdigest()[:24]


def repeats_at_end(signatures: list[str]) -> int:
    """How many times the last signature repeats at the end of the list."""
    if not signatures:
        return 0
    last, count = signatures[-1], 0
    for signature in reversed(signatures):
        if signature != last:
            break
        count += 1
    return count


def check_write_target(agent: AgentConfig, check: ToolCheck, context: SurfaceContext) -> ToolCheck:
    """A writing tool acts only where the agent is bound: the tool's `limit_to` when it has one
    (config validation keeps it within the agent's surface), else the surface's channels or
    repositories."""
    spec = check.definition
    if spec is None or spec.bound_by is None or spec.bound_argument is None:
        return check
    target = check.arguments.get(spec.bound_argument)
    if target is None:  # the tool's default: the task's own channel or thread
        return check
    grant = agent.spec.tool(spec.name)
    allowed = (
        list(grant.limit_to) if grant is not None and grant.limit_to else bound_targets(agent, spec.bound_by)
    )
    if str(target) in allowed:
        return check
    where = ", ".join(allowed) or "none"
    places = {
        WriteBound.SLACK_CHANNELS: "channels",
        WriteBound.GITHUB_REPOS: "repositories",
        WriteBound.LINEAR_TEAMS: "Linear teams",
        WriteBound.DISCORD_CHANNELS: "Discord channels",
    }
    what = places.get(spec.bound_by, f"targets (the limit_to of its {spec.name} grant)")
    problem = f"{spec.name} may not act on {target!r}: this agent may only write to its own {what} ({where})"
    return ToolCheck(False, spec, check.arguments, problem, "not_allowed")


def bound_targets(agent: AgentConfig, bound_by: WriteBound) -> list[str]:
    surfaces = agent.spec.surfaces
    if bound_by == WriteBound.SLACK_CHANNELS:
        return list(surfaces.slack.channels) if surfaces.slack else []
    if bound_by == WriteBound.GITHUB_REPOS:
        return list(surfaces.github.repos) if surfaces.github else []
    if bound_by == WriteBound.DISCORD_CHANNELS:
        return list(surfaces.discord.channels) if surfaces.discord else []
    if bound_by == WriteBound.LINEAR_TEAMS:
        return list(surfaces.linear.teams) if surfaces.linear else []
    return []  # named only by the grant's limit_to


def call_key(position: int, tool: str, arguments: dict[str, Any] | str) -> str:
    """Names one call of a step in keys and request ids: its arguments' hash and its position
    in the model's answer, never the provider's call id (repeated or empty from some)."""
    canonical = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    digest = hashlib.sha256(f"{tool}\n{canonical}".encode()).hexdigest()[:8]
    return f"{digest}-{position:03d}"


def memory_scope(agent: AgentConfig, context: SurfaceContext) -> MemoryScopeRef:
    """The one memory scope a task reads and writes, as the agent's spec says."""
    memory = agent.spec.memory
    scope = memory.scope.value
    if context.surface == "slack" and context.channel.startswith("D"):
        scope = "channel"  # a DM is private: its memory is its own, never recalled elsewhere
    key = {
        "channel": f"{context.surface}:{context.channel}",
        "agent": agent.name,
        "workspace": agent.workspace,
    }[scope]
    return MemoryScopeRef(
        workspace=agent.workspace,
        agent=agent.name,
        scope=scope,
        scope_key=key,
        embedding=memory.embedding,
        retention_days=memory.retention_days,
    )
