"""A tool the workflow runs itself is one declaration (`workflows/tools/`): the catalog's
grants and permissions, the model's tool list, the reading tools of subagent profiles and
the routing of specs recorded by release 0.1.0 all derive from it."""

from __future__ import annotations

import json

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

from activities.tools.catalog import SPECS, model_tools, specs_for, tool_permissions, writes_of
from config.loader import parse_agent
from config.subagents import BUILT_IN_PROFILES, allows_tool
from workflows.tool_catalog import ToolRuns, ToolSpec
from workflows.tools import WORKFLOW_TOOLS, skill_specs, starts_task
from workflows.tools.agents import DelegateArgs, delegate
from workflows.workflow_tool import workflow_tool

AGENT = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: coder}
spec:
  instructions: Code.
  model_policy: {default: scripted/model}
  tools:
    - {name: agent.delegate, permissions: ["agents:delegate"]}
    - {name: code.open_workspace, permissions: ["code:read"]}
    - {name: github.create_pull_request, permissions: ["pulls:write"]}
    - {name: memory.search, permissions: ["memory:read"]}
  surfaces: {github: {repos: [acme/api]}}
"""


def test_the_catalog_grants_the_workflow_tools_but_not_the_ones_that_come_with_skills() -> None:
    permissions = tool_permissions()
    assert permissions["agent.delegate"] == "agents:delegate"
    assert permissions["github.create_pull_request"] == "pulls:write"
    assert "skill.load" not in permissions and "skill.read" not in permissions
    assert [spec.name for spec in skill_specs()] == ["skill.load", "skill.read"]
    agent = parse_agent(AGENT)
    specs = specs_for(agent)
    assert [spec.name for spec in specs] == [grant.name for grant in agent.spec.tools]
    assert specs[0] is WORKFLOW_TOOLS["agent.delegate"].spec
    assert writes_of(agent).writes == {"github.create_pull_request"}
    assert writes_of(agent).ungated == []  # a pull request always waits for a person


def test_the_model_is_offered_the_workflow_tools_as_declared() -> None:
    names = ["agent.delegate", "skill.load", "code.open_workspace", "github.create_pull_request"]
    offered = model_tools([*names, "memory.search", "jira.create_issue"])  # an MCP tool: not here
    assert [tool["function"]["name"] for tool in offered] == [  # type: ignore[index]
        "agent__delegate",
        "skill__load",
        "code__open_workspace",
        "github__create_pull_request",
        "memory__search",
    ]
    assert offered[:4] == [WORKFLOW_TOOLS[name].spec.openai_schema() for name in names]


def test_every_workflow_tool_runs_in_the_workflow_and_only_delegation_starts_tasks() -> None:
    assert {spec.runs for spec in SPECS.values() if spec.name in WORKFLOW_TOOLS} == {ToolRuns.WORKFLOW}
    assert [name for name in WORKFLOW_TOOLS if starts_task(name)] == ["agent.delegate", "agent.ask_teammate"]
    assert [name for name, tool in WORKFLOW_TOOLS.items() if tool.parallel] == ["agent.delegate"]


def test_a_workflow_tool_is_declared_once() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        workflow_tool("agent.delegate", DelegateArgs, "again", permission="agents:delegate", writes=False)(
            delegate.handler
        )


def test_the_reading_tools_of_a_profile_are_the_catalogs() -> None:
    reading = [name for name, spec in SPECS.items() if spec.reads_only]
    assert sorted(reading) == [
        "code.diff",
        "code.list_files",
        "code.open_workspace",
        "code.read_file",
        "code.search",
        "github.get_issue",
        "github.get_job_log",
        "github.list_failed_runs",
        "github.search_issues",
        "linear.get_issue",
        "linear.search_issues",
        "memory.search",
        "skill.load",
        "skill.read",
        "slack.read_thread",
    ]

    def allowed(profile: str) -> list[str]:
        return [
            name
            for name, spec in SPECS.items()
            if allows_tool(BUILT_IN_PROFILES[profile], name, spec.reads_only)
        ]

    assert allowed("explore") == allowed("plan") == reading
    code = allowed("code")
    assert set(reading) < set(code) and {"code.write_file", "code.run", "github.create_pull_request"} <= set(
        code
    )
    assert not {"github.comment", "slack.post_message", "agent.delegate", "agent.ask_teammate"} & set(code)


def _decoded(recorded: dict[str, object]) -> ToolSpec:
    payload = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(recorded).encode())
    [spec] = pydantic_data_converter.payload_converter.from_payloads([payload], [ToolSpec])
    assert isinstance(spec, ToolSpec)
    return spec


@pytest.mark.parametrize(
    ("runs", "source", "routed"),
    [
        ("child", "delegate", ToolRuns.WORKFLOW),
        ("child", "teammate", ToolRuns.WORKFLOW),
        ("local", "skill", ToolRuns.WORKFLOW),
        ("workspace", "workspace", ToolRuns.WORKFLOW),
        ("remote", "pull_request", ToolRuns.WORKFLOW),
        ("remote", "mcp:linear", ToolRuns.MCP),
        ("local", "native", ToolRuns.LOCAL),
        ("remote", "native", ToolRuns.REMOTE),
        ("workspace", "native", ToolRuns.WORKSPACE),
    ],
)
def test_a_spec_recorded_by_0_1_0_routes_as_it_did(runs: str, source: str, routed: ToolRuns) -> None:
    recorded = {
        "name": "x.y",
        "description": "",
        "parameters": {"type": "object"},
        "permission": "x:read",
        "writes": False,
        "runs": runs,
        "bound_argument": None,
        "bound_by": None,
        "source": source,
        "sha256": "recorded",
        "always_gated": False,
    }
    spec = _decoded(recorded)
    assert (spec.runs, spec.source, spec.sha256) == (routed, source, "recorded")
    assert spec.native == (source == "native")
