"""The tool catalog: every native tool, every tool the workflow runs itself, and the specs
an agent's task starts with.

Importing this module imports each native tool family (every `activities/tools/*_tools.py`)
once, which declares its tools: a new family is a new file, nothing to register here. The
workflow's own tools are declared in `workflows/tools/` and read from there. A task gets
`specs_for(agent)` in its input and keeps them; config validation gets `tool_permissions()`;
playbook approval checks get `writes_of(agent)`; the model gets `model_tools(names)`; the
tool activity dispatches through `native(name)`.
"""

from __future__ import annotations

import importlib
import pkgutil

import activities.tools
from activities.tools.native import NativeTool, declared
from config.agent import AgentConfig
from config.playbooks.agents import AgentWrites, agent_writes
from workflows.tool_catalog import ToolSpec
from workflows.tools import WORKFLOW_TOOLS

TOOL_FAMILIES = [
    importlib.import_module(f"activities.tools.{module.name}")
    for module in sorted(pkgutil.iter_modules(activities.tools.__path__), key=lambda m: m.name)
    if module.name.endswith("_tools")
]
NATIVE_TOOLS: dict[str, NativeTool] = declared()


def native(name: str) -> NativeTool | None:
    return NATIVE_TOOLS.get(name)


# Every declared tool's spec; the ones an agent may be granted in spec.tools leave out the
# skill tools, which come with a task's skills.
SPECS: dict[str, ToolSpec] = {
    **{name: tool.spec for name, tool in NATIVE_TOOLS.items()},
    **{name: tool.spec for name, tool in WORKFLOW_TOOLS.items()},
}
GRANTABLE: dict[str, ToolSpec] = {
    name: spec
    for name, spec in SPECS.items()
    if name not in WORKFLOW_TOOLS or not WORKFLOW_TOOLS[name].with_skills
}


def specs_for(agent: AgentConfig) -> list[ToolSpec]:
    """The specs of the tools the agent is granted, in the order its config lists them."""
    return [GRANTABLE[grant.name] for grant in agent.spec.tools if grant.name in GRANTABLE]


def writes_of(agent: AgentConfig) -> AgentWrites:
    """The agent's writing tools (native, workflow-run and its MCP servers' `writes`) and the
    ones an approval covers: what a playbook step's approval check reads, at compile time and
    again when the step starts."""
    writing = {name for name, spec in GRANTABLE.items() if spec.writes}
    always = {name for name, spec in GRANTABLE.items() if spec.always_gated}
    return agent_writes(agent, writing, always)


def tool_permissions() -> dict[str, str]:
    """Each runnable tool and the permission it needs: what config validation checks against."""
    return {name: spec.permission for name, spec in GRANTABLE.items()}


def model_tools(names: list[str]) -> list[dict[str, object]]:
    """The named tools as the model sees them (native and the workflow's own; MCP tools are
    listed at a task's start, not here)."""
    return [SPECS[name].openai_schema() for name in names if name in SPECS]


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
