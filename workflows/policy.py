"""Pure policy decisions of a task: which tools it may call, which need approval, who may
approve, and the action id that binds a decision to exact arguments.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import jsonschema

from config.agent import AgentConfig
from workflows.tool_catalog import NATIVE_TOOLS, ToolDefinition

MAX_INVALID_TOOL_CALLS_IN_A_ROW = 3


def action_id(tool: str, arguments: dict[str, Any]) -> str:
    """A decision is bound to this: the tool name and its exact, canonical arguments."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{tool}\n{canonical}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ToolCheck:
    allowed: bool
    definition: ToolDefinition | None
    arguments: dict[str, Any]
    problem: str = ""  # told to the model when not allowed or invalid
    kind: str = ""  # invalid | not_allowed | unknown


def check_tool_call(agent: AgentConfig, name: str, raw_arguments: str) -> ToolCheck:
    """Parse and validate a model's tool call against the catalog and the agent's config."""
    definition = NATIVE_TOOLS.get(name)
    granted = agent.spec.tool(name)
    if definition is None:
        known = ", ".join(t.name for t in agent.spec.tools) or "none"
        return ToolCheck(False, None, {}, f"unknown tool {name!r}; tools you have: {known}", "unknown")
    if granted is None:
        return ToolCheck(False, definition, {}, f"tool {name!r} is not enabled for this agent", "not_allowed")
    if definition.permission not in granted.permissions:
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


def needs_approval(agent: AgentConfig, tool: str) -> bool:
    return tool in agent.spec.approvals.require_for


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
