"""The seed form of an agent (surface lists, tool groups, approvals by permission) read as
today's form; problems at the line the user wrote; `to_seed_form` back; Slack names."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from activities.slack.names import SlackNames, names_in, resolve_names
from activities.tools.catalog import tool_permissions
from config.agent import AgentConfig
from config.loader import (
    EXAMPLES_DIR,
    AgentConfigError,
    ConfigProblem,
    converted_documents,
    load_agent_file,
    parse_agent,
    value_location,
)
from config.seed_form import expand
from config.seed_form_back import to_seed_form

TOOLS = tool_permissions()

# The shapes of the agent files the system we replace documents, in our own words.
SEED = """\
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: { name: infra-buddy, workspace: demo }
spec:
  surfaces:
    - { type: slack, channel: "#infra" }
    - { type: discord, channel: "ops" }
    - { type: github, repo: demo/infra }
  memory: { scope: channel, backend: postgres, retention_days: 60 }
  model_policy:
    default: openai/gpt-4o-mini
    routes:
      - { match: { task: code }, model: anthropic/claude-sonnet-4-5 }
  tools:
    - { name: github, type: native, permissions: ["issues:write", "pulls:read"] }
  approvals:
    require_for: ["github.issues:write", "github.pulls:write"]
    approvers: ["@sam", "@oncall"]
  budget: { monthly_usd: 40, per_task_usd: 0.40, on_exceeded: block }
"""
WITHOUT_DISCORD = "\n".join(line for line in SEED.splitlines() if "discord" not in line) + "\n"


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def problems(text: str) -> list[str]:
    with pytest.raises(AgentConfigError) as caught:
        parse_agent(text, "agent.yaml", tools=TOOLS)
    return [str(p) for p in caught.value.problems]


def test_the_discord_line_binds_its_channel_without_a_warning() -> None:
    warnings: list[ConfigProblem] = []
    agent = parse_agent(SEED, "agent.yaml", tools=TOOLS, warnings=warnings)
    assert warnings == []
    assert agent.spec.surfaces.discord is not None and agent.spec.surfaces.discord.channels == ["ops"]
    without = parse_agent(WITHOUT_DISCORD, tools=TOOLS)
    assert agent.spec.surfaces.model_dump(exclude={"discord"}) == without.spec.surfaces.model_dump(
        exclude={"discord"}
    )
    assert agent.spec.tools == without.spec.tools


def test_a_surface_this_release_does_not_know_is_refused_at_its_line() -> None:
    unknown = SEED.replace("type: discord", "type: teams")
    with pytest.raises(AgentConfigError) as raised:
        parse_agent(unknown, "agent.yaml", tools=TOOLS)
    assert f"agent.yaml:{line_of(unknown, 'teams')}" in str(raised.value)
    assert "surface 'teams' is not served by this release" in str(raised.value)


def test_seed_form_reads_as_todays_form() -> None:
    agent = parse_agent(WITHOUT_DISCORD, tools=TOOLS)
    spec = agent.spec
    assert spec.surfaces.slack is not None and spec.surfaces.slack.channels == ["#infra"]
    assert spec.surfaces.github is not None and spec.surfaces.github.repos == ["demo/infra"]
    assert spec.surfaces.cli is True
    # every github tool issues:write allows; pulls:read grants no tool this release runs
    assert [(t.name, t.permissions) for t in spec.tools] == [
        ("github.create_issue", ["issues:write"]),
        ("github.comment", ["issues:write"]),
    ]
    # github.pulls:write gates nothing: no granted tool needs it
    assert spec.approvals.require_for == ["github.create_issue", "github.comment"]
    assert spec.approvals.approvers == ["@sam", "@oncall"]
    assert spec.model_policy.routes[0].match.task == "code"
    assert (spec.memory.scope, spec.memory.retention_days) == ("channel", 60)
    assert (spec.budget.monthly_usd, spec.budget.per_task_usd, spec.budget.on_exceeded) == (40, 0.4, "block")


def test_todays_form_is_unchanged_by_the_expansion() -> None:
    for path in EXAMPLES_DIR.glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        expansion = expand(data, TOOLS)
        assert expansion.data == data and not expansion.problems
        assert all(came_from == loc for loc, came_from in expansion.origins.items())


def test_problems_in_a_group_point_at_the_group() -> None:
    text = WITHOUT_DISCORD.replace('"pulls:read"] }', '"pulls:read"], limit_to: [demo/other] }').replace(
        '"issues:write", "pulls', '"issue:write", "issues:write", "pulls'
    )
    found = problems(text)
    group = line_of(text, "name: github")
    assert found == [
        f"agent.yaml:{group}: spec.tools[0].limit_to[0]: 'demo/other' is not one of this agent's "
        "channels or repositories (#infra, demo/infra); limit_to can only narrow them",
        f"agent.yaml:{group}: spec.tools[0].permissions[0]: 'issue:write' is not a permission; "
        "did you mean 'issues:write'?",
    ]  # once, though the group stands for two tools


def test_groups_that_grant_nothing_and_unknown_families_are_problems() -> None:
    text = WITHOUT_DISCORD.replace('["issues:write", "pulls:read"]', '["pulls:read"]').replace(
        '"github.pulls:write"', '"jira.issues:write"'
    )
    found = problems(text)
    assert any(
        f":{line_of(text, 'name: github')}: spec.tools[0].permissions: no github tool" in p for p in found
    )
    assert any(
        "spec.approvals.require_for[1]: 'jira.issues:write': 'jira' is not a tool family" in p for p in found
    )


def test_surface_items_are_checked_at_their_own_keys() -> None:
    text = WITHOUT_DISCORD.replace('channel: "#infra" }', 'channel: "#infra", topic: x }').replace(
        "repo: demo/infra", "repo: not/a/repo"
    )
    found = problems(text)
    topic = line_of(text, "topic")
    assert found[0].startswith(f"agent.yaml:{topic}: spec.surfaces[0].topic: unknown key 'topic' for a slack")
    assert found[1].startswith(
        f"agent.yaml:{line_of(text, 'not/a/repo')}: spec.surfaces[1].repo: 'not/a/repo'"
    )


def test_a_group_next_to_a_named_tool_leaves_it_as_written() -> None:
    text = WITHOUT_DISCORD.replace(
        "  approvals:",
        "    - { name: github.comment, permissions: [issues:write], limit_to: [demo/infra] }\n  approvals:",
    )
    tools = parse_agent(text, tools=TOOLS).spec.tools
    assert [(t.name, t.limit_to) for t in tools] == [
        ("github.create_issue", []),
        ("github.comment", ["demo/infra"]),
    ]


@pytest.mark.parametrize("path", sorted(EXAMPLES_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_to_seed_form_and_back_is_the_same_agent(path: Path, tmp_path: Path) -> None:
    seed = [to_seed_form(d, TOOLS) for d in converted_documents(path, tools=TOOLS)]
    again = tmp_path / "seed.yaml"
    again.write_text(yaml.safe_dump_all(seed, sort_keys=False))
    assert load_agent_file(again, tools=TOOLS) == load_agent_file(path, tools=TOOLS)
    assert isinstance(seed[0]["spec"].get("surfaces", []), list)


def test_value_location_finds_the_line_the_user_wrote(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(WITHOUT_DISCORD)
    assert value_location(path, 0, "@oncall") == (
        line_of(WITHOUT_DISCORD, "@oncall"),
        "spec.approvals.approvers[1]",
    )
    assert value_location(path, 0, "#infra") == (
        line_of(WITHOUT_DISCORD, "#infra"),
        "spec.surfaces[0].channel",
    )


class StubNames(SlackNames):
    """The directory without Slack: a few names."""

    def __init__(self) -> None:
        pass

    async def channel(self, name: str) -> str | None:
        return {"infra": "C0INFRA"}.get(name)

    async def user(self, handle: str) -> str | None:
        return {"sam": "U0SAM"}.get(handle)

    async def group(self, handle: str) -> tuple[str, list[str]] | None:
        return {"oncall": ("S0ONCALL", ["U0KIM", "U0SAM"])}.get(handle)


def test_slack_names_become_ids() -> None:
    agent = parse_agent(WITHOUT_DISCORD, tools=TOOLS)
    assert names_in(agent) == ["#infra", "@sam", "@oncall"]
    resolved, found = asyncio.run(resolve_names(agent, StubNames()))
    assert found == []
    assert resolved.spec.surfaces.slack is not None and resolved.spec.surfaces.slack.channels == ["C0INFRA"]
    # A group stays a group: its members are read when an approval is requested.
    assert resolved.spec.approvals.approvers == ["U0SAM", "S0ONCALL"]


def test_a_missing_slack_name_is_a_problem_at_its_place() -> None:
    agent: AgentConfig = parse_agent(WITHOUT_DISCORD.replace("@oncall", "@nobody"), tools=TOOLS)
    resolved, found = asyncio.run(resolve_names(agent, StubNames()))
    assert resolved is agent
    assert [(p.loc, p.name) for p in found] == [(("spec", "approvals", "approvers", 1), "@nobody")]
    assert "no Slack user or user group with the handle @nobody" in found[0].message
