"""An agent on Linear: the seed form's `{type: linear, team: ENG}` and `linear` tool group,
team keys checked with the line and the fix, and writes bound to the agent's teams."""

from __future__ import annotations

import json

import pytest

from activities.tools.catalog import SPECS, tool_permissions
from config.loader import AgentConfigError, parse_agent
from workflows import policy
from workflows.types import SurfaceContext

TOOLS = tool_permissions()
SEED = """\
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: { name: triage }
spec:
  surfaces:
    - { type: linear, team: ENG }
  tools:
    - { name: linear, permissions: ["issues:read", "issues:write"] }
  approvals:
    require_for: ["linear.issues:write"]
    approvers: ["linear:bob@acme.test"]
"""


def test_the_seed_form_binds_a_team_and_grants_the_linear_family() -> None:
    agent = parse_agent(SEED, "agent.yaml", tools=TOOLS)
    assert agent.spec.surfaces.linear is not None and agent.spec.surfaces.linear.teams == ["ENG"]
    granted = sorted(t.name for t in agent.spec.tools)
    assert granted == [
        "linear.comment",
        "linear.create_issue",
        "linear.get_issue",
        "linear.search_issues",
        "linear.update_issue_state",
    ]
    assert sorted(agent.spec.approvals.require_for) == [
        "linear.comment",
        "linear.create_issue",
        "linear.update_issue_state",
    ]


def test_a_bad_team_is_refused_at_its_line_with_the_fix() -> None:
    with pytest.raises(AgentConfigError) as caught:
        parse_agent(SEED.replace("team: ENG", "team: 'eng team'"), "agent.yaml", tools=TOOLS)
    problem = str(caught.value.problems[0])
    assert problem.startswith("agent.yaml:6:") and "not a Linear team key (ENG" in problem


@pytest.mark.parametrize(("team", "allowed"), [("ENG", True), ("OPS", False)])
def test_writes_are_bound_to_the_agents_teams(team: str, allowed: bool) -> None:
    agent = parse_agent(SEED, "agent.yaml", tools=TOOLS)
    arguments = json.dumps({"team": team, "issue": f"{team}-1", "body": "done"})
    checked = policy.check_tool_call(agent, SPECS["linear.comment"], "linear.comment", arguments)
    assert checked.allowed
    bound = policy.check_write_target(agent, checked, SurfaceContext("linear", "ENG", "linear:u1"))
    assert bound.allowed is allowed
    if not allowed:
        assert "may only write to its own Linear teams (ENG)" in bound.problem
