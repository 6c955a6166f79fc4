"""`spec.subagents` in an agent file: depth at most 2 (a deeper one names the fix), profiles
that override the built-in ones field by field, and a profile tool matching none of the
agent's tools reported at its own file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.loader import AgentConfigError, load_agent_file, parse_agent
from config.subagents import BUILT_IN_PROFILES

AGENT = """\
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: lead}
spec:
  tools:
    - {name: agent.delegate, permissions: ["agents:delegate"]}
    - {name: memory.search, permissions: ["memory:read"]}
    - {name: github.get_issue, permissions: ["issues:read"]}
"""


def problems_of(tmp_path: Path, text: str) -> list[tuple[int | None, str, str]]:
    path = tmp_path / "lead.yaml"
    path.write_text(text)
    with pytest.raises(AgentConfigError) as raised:
        load_agent_file(path)
    assert all(problem.file == str(path) for problem in raised.value.problems)
    return [(problem.line, problem.field, problem.message) for problem in raised.value.problems]


def test_the_defaults_one_level_four_at_a_time_and_the_built_in_profiles() -> None:
    subagents = parse_agent(AGENT).spec.subagents
    assert (subagents.max_depth, subagents.max_parallel) == (1, 4)
    assert subagents.profile_names == ["code", "explore", "plan"]
    assert subagents.profile("explore") == BUILT_IN_PROFILES["explore"]
    assert subagents.profile("review") is None
    assert subagents.child().max_depth == 0


def test_a_depth_above_two_is_an_error_naming_the_fix(tmp_path: Path) -> None:
    text = AGENT + "  subagents:\n    max_depth: 3\n"
    [(line, field, message)] = problems_of(tmp_path, text)
    assert (line, field) == (10, "spec.subagents.max_depth")
    assert "set max_depth: 2" in message and "max_depth 3" in message
    assert parse_agent(AGENT + "  subagents: {max_depth: 2}\n").spec.subagents.max_depth == 2


def test_an_override_keeps_the_built_in_fields_it_leaves_out_and_a_new_profile_is_known() -> None:
    text = AGENT + (
        "  subagents:\n"
        "    profiles:\n"
        "      explore: {tools: [memory.search]}\n"
        "      triage: {instructions: Sort the issues., tools: ['github.*']}\n"
    )
    subagents = parse_agent(text).spec.subagents
    explore = subagents.profile("explore")
    assert explore is not None and explore.tools == ["memory.search"]
    assert explore.instructions == BUILT_IN_PROFILES["explore"].instructions
    assert subagents.profile_names == ["code", "explore", "plan", "triage"]


def test_a_profile_tool_matching_none_of_the_agents_tools_points_at_its_line(tmp_path: Path) -> None:
    text = AGENT + (
        "  subagents:\n"
        "    profiles:\n"
        "      fixer:\n"
        "        tools:\n"
        "          - memory.search\n"
        "          - code.*\n"
        "      Bad_Name: {}\n"
    )
    problems = problems_of(tmp_path, text)
    assert (14, "spec.subagents.profiles.fixer.tools[1]") in [(line, field) for line, field, _ in problems]
    tools_problem = next(message for _, field, message in problems if field.endswith("tools[1]"))
    assert "'code.*' matches none of this agent's tools" in tools_problem
    assert "agent.delegate, memory.search, github.get_issue" in tools_problem
    assert any(field == "spec.subagents.profiles.Bad_Name" for _, field, _ in problems)
