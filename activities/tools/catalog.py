"""The tool catalog: every native tool, and the specs an agent's task starts with.

Importing this module imports each tool family (every `activities/tools/*_tools.py`) once,
which declares its tools: a new family is a new file, nothing to register here. A task gets
`specs_for(agent)` in its input and keeps them; config validation gets `tool_permissions()`;
playbook approval checks get `writes_of(agent)`; the tool activity dispatches through
`native(name)`.
"""

from __future__ import annotations

import importlib
import pkgutil

import activities.tools
from activities.tools.native import NativeTool, declared
from config.agent import AgentConfig
from config.playbooks.agents import AgentWrites, agent_writes
from workflows.delegate_tool import ASK_TEAMMATE, DELEGATE
from workflows.tool_catalog import ToolSpec
from workflows.workspace_tool_specs import CREATE_PULL_REQUEST_SPEC, OPEN_WORKSPACE

TOOL_FAMILIES = [
    importlib.import_module(f"activities.tools.{module.name}")
    for module in sorted(pkgutil.iter_modules(activities.tools.__path__), key=lambda m: m.name)
    if module.name.endswith("_tools")
]
NATIVE_TOOLS: dict[str, NativeTool] = declared()


def native(name: str) -> NativeTool | None:
    return NATIVE_TOOLS.get(name)


# Tools the workflow runs itself (a child workflow, a workspace, a pull request after its
# approval), granted in spec.tools like native ones.
WORKFLOW_TOOLS: dict[str, ToolSpec] = {
    spec.name: spec for spec in (DELEGATE, ASK_TEAMMATE, OPEN_WORKSPACE, CREATE_PULL_REQUEST_SPEC)
}


def specs_for(agent: AgentConfig) -> list[ToolSpec]:
    """The specs of the tools the agent is granted, in the order its config lists them."""
    granted = {**{name: tool.spec for name, tool in NATIVE_TOOLS.items()}, **WORKFLOW_TOOLS}
    return [granted[grant.name] for grant in agent.spec.tools if grant.name in granted]


def writes_of(agent: AgentConfig) -> AgentWrites:
    """The agent's writing tools (native, workflow-run and its MCP servers' `writes`) and the
    ones an approval covers: what a playbook step's approval check reads, at compile time and
    again when the step starts."""
    specs = {**{name: tool.spec for name, tool in NATIVE_TOOLS.items()}, **WORKFLOW_TOOLS}
    writing = {name for name, spec in specs.items() if spec.writes}
    always = {name for name, spec in specs.items() if spec.always_gated}
    return agent_writes(agent, writing, always)


def tool_permissions() -> dict[str, str]:
    """Each runnable tool and the permission it needs: what config validation checks against."""
    native = {name: tool.spec.permission for name, tool in NATIVE_TOOLS.items()}
    return native | {name: spec.permission for name, spec in WORKFLOW_TOOLS.items()}


def model_tools(names: list[str]) -> list[dict[str, object]]:
    """The named tools as the model sees them."""
    return [NATIVE_TOOLS[name].spec.openai_schema() for name in names if name in NATIVE_TOOLS]


def unguarded_writes(agent: AgentConfig) -> list[str]:
    """Warnings for tools that write but are neither gated by an approval nor limited to
    named channels or repositories: the model alone decides what they do."""
    gated = set(agent.spec.approvals.require_for)
    return [
        f"{grant.name} writes but is neither in approvals.require_for nor limited with limit_to; "
        "a prompt injection could make it act unreviewed"
        for grant in agent.spec.tools
        if grant.name in NATIVE_TOOLS
        and NATIVE_TOOLS[grant.name].spec.writes
        and grant.name not in gated
        and not grant.limit_to
    ]
