"""pyopenloop's own agent files (tests/fixtures/seeds/pyopenloop, unchanged) validate as
written: what has a meaning here is mapped, what has none is a warning at its line, and
`agents convert` keeps the user's comments and writes a file that validates."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from activities.tools.catalog import tool_permissions
from config.agent import AgentConfig
from config.loader import (
    EXAMPLES_DIR,
    AgentConfigError,
    ConfigProblem,
    expanded_documents,
    load_agent_documents,
    load_agent_file,
    parse_agent,
)
from config.mcp import McpServer, header_value
from config.seed_convert import convert_text

TOOLS = tool_permissions()
SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds" / "pyopenloop"
FILES = sorted(SEEDS.rglob("*.yaml"))
NEWEST = SEEDS / "pypi-0.1.1" / "agents" / "dev-platform.yaml"
UNIT_DATA = SEEDS / "pypi-0.1.1" / "tests" / "unit" / "data" / "agent.yaml"
CODE = [
    "code.open_workspace",
    "code.list_files",
    "code.read_file",
    "code.search",
    "code.diff",
    "code.edit_file",
    "code.write_file",
    "code.run",
    "code.run_tests",
]


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def load(path: Path) -> tuple[AgentConfig, list[ConfigProblem]]:
    warnings: list[ConfigProblem] = []
    return load_agent_file(path, tools=TOOLS, warnings=warnings), warnings


def test_the_fixtures_are_the_six_real_files() -> None:
    assert len(FILES) == 6


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SEEDS)))
def test_each_real_file_validates_and_binds_its_discord_channel(path: Path) -> None:
    agent, warnings = load(path)
    assert not [w for w in warnings if w.field.startswith("spec.surfaces")]
    assert agent.spec.surfaces.discord is not None and agent.spec.surfaces.discord.channels == ["eng"]
    assert agent.spec.surfaces.slack is not None and agent.spec.surfaces.slack.channels == ["#dev-platform"]
    assert agent.apiVersion == "openloop.ai/v1alpha1"
    if "id:" in path.read_text():  # pyopenloop 0.1's identity of record
        (identity,) = [w for w in warnings if w.field == "metadata.id"]
        assert identity.line == line_of(path, "  id: ")
        assert "known by workspace and name" in identity.message


def test_the_newest_file_maps_onto_our_fields() -> None:
    agent, warnings = load(NEWEST)
    spec = agent.spec
    assert (agent.workspace, agent.name) == ("openloop-team", "openloop")
    assert [route.match.task for route in spec.model_policy.routes] == ["summarize", "code", "investigate_ci"]
    assert spec.model_policy.models_for("investigate_ci")[0] == "anthropic/claude-sonnet-4-6"
    assert [t.name for t in spec.tools] == [
        "github.create_issue",
        "github.comment",
        "github.create_pull_request",
        *CODE,
    ]
    assert spec.mcp_servers == [
        McpServer(
            name="github-mcp",
            transport="streamable-http",
            url="https://api.githubcopilot.com/mcp/",
            headers={"X-MCP-Readonly": "true", "X-MCP-Toolsets": "issues,pull_requests,actions"},
            headers_from_env={"Authorization": "Bearer ${GITHUB_TOKEN}"},
            allow=[
                "list_issues",
                "issue_read",
                "search_issues",
                "list_pull_requests",
                "pull_request_read",
                "actions_list",
                "actions_get",
                "get_job_logs",
            ],
        )
    ]
    # workspace_task.code:write gates the pull request (github.pulls:write gated it already)
    assert spec.approvals.require_for == [
        "github.create_issue",
        "github.comment",
        "github.create_pull_request",
    ]
    assert (spec.limits.max_concurrent_tasks, spec.limits.tasks_per_minute) == (4, 30)
    assert (spec.budget.monthly_usd, spec.budget.per_task_usd) == (50, 1.5)
    # the coding tools have no repository to open: said at the workspace_task group
    (repos,) = [w for w in warnings if "code.open_workspace has nothing to open" in w.message]
    assert repos.line == line_of(NEWEST, "name: workspace_task")


def test_coding_worker_and_an_mcp_server_without_credentials() -> None:
    agent, _ = load(UNIT_DATA)
    spec = agent.spec
    assert [t.name for t in spec.tools] == [
        "github.get_issue",
        "github.search_issues",
        "github.create_issue",
        "github.comment",
        "github.create_pull_request",
        *CODE,
    ]
    assert [(s.name, s.transport, s.url, s.allow, s.headers_from_env) for s in spec.mcp_servers] == [
        ("ci-logs", "streamable-http", "http://localhost:8931", ["get_run_logs", "list_runs"], {})
    ]
    assert spec.approvals.require_for == [
        "github.create_issue",
        "github.comment",
        "github.create_pull_request",
    ]


def test_investigate_read_alone_grants_only_reading_code_tools() -> None:
    text = UNIT_DATA.read_text().replace(
        '- name: coding_worker\n      type: native\n      permissions: ["pr:write"]',
        '- name: workspace_task\n      type: native\n      permissions: ["investigate:read"]',
    )
    text = text.replace("- coding_worker.pr:write", "- workspace_task.investigate:read")
    spec = parse_agent(text, tools=TOOLS).spec
    assert [t.name for t in spec.tools if not t.name.startswith("github.")] == CODE[:5]
    assert "code.open_workspace" in spec.approvals.require_for


def test_an_mcp_tool_without_a_server_and_an_unknown_credential() -> None:
    text = UNIT_DATA.read_text().replace("server: http://localhost:8931", "credentials: jira")
    with pytest.raises(AgentConfigError) as caught:
        parse_agent(text, "agent.yaml", tools=TOOLS)
    (problem,) = caught.value.problems
    assert problem.field == "spec.tools[2].server" and "needs `server`" in problem.message
    warnings: list[ConfigProblem] = []
    parse_agent(
        text.replace("credentials: jira", "server: npx ci-logs\n      credentials: jira"),
        tools=TOOLS,
        warnings=warnings,
    )
    assert any(
        w.field == "spec.tools[2].credentials" and "'jira' names no credential" in w.message for w in warnings
    )


def test_an_unknown_surface_type_is_still_a_problem() -> None:
    text = UNIT_DATA.read_text().replace("type: discord", "type: teams")
    with pytest.raises(AgentConfigError) as caught:
        parse_agent(text, "agent.yaml", tools=TOOLS)
    assert [p.field for p in caught.value.problems] == ["spec.surfaces[1].type"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SEEDS)))
def test_convert_keeps_every_comment_annotates_changes_and_validates(path: Path, tmp_path: Path) -> None:
    original = path.read_text()
    converted = convert_text(original, expanded_documents(path, tools=TOOLS))
    rows = converted.splitlines()
    for line in original.splitlines():
        comment = line[line.index("#") :].strip() if "#" in line and '"#' not in line else None
        if comment:
            assert any(comment in row for row in rows), comment
    assert any(
        "task: investigate_ci" in row and "# converted: task investigate is investigate_ci here" in row
        for row in rows
    )
    assert any("discord:  # converted: surface list item: surfaces.discord" in row for row in rows)
    out = tmp_path / "agent.yaml"
    out.write_text(converted)
    again, warnings = load(out)
    before, _ = load(path)
    assert again == before
    assert not [w for w in warnings if "discord" in w.message or w.field == "metadata.id"]
    assert yaml.safe_load(converted)["spec"]["surfaces"] == {
        "slack": {"channels": ["#dev-platform"]},
        "discord": {"channels": ["eng"]},
    }


def test_headers_from_env_reads_a_variable_or_fills_a_template() -> None:
    env = {"GITHUB_TOKEN": "t0k"}
    assert header_value("GITHUB_TOKEN", env.__getitem__) == "t0k"
    assert header_value("Bearer ${GITHUB_TOKEN}", env.__getitem__) == "Bearer t0k"
    with pytest.raises(ValueError, match="carries a credential"):
        McpServer(name="gh", transport="streamable-http", url="https://x/mcp", headers={"Authorization": "x"})
    with pytest.raises(ValueError, match="never the value itself"):
        McpServer(
            name="gh", transport="streamable-http", url="https://x/mcp", headers_from_env={"A": "abc def"}
        )


def converted(path: Path) -> list[str]:
    return convert_text(path.read_text(), expanded_documents(path, tools=TOOLS)).splitlines()


def test_convert_puts_an_items_comments_above_what_it_became() -> None:
    rows = converted(NEWEST)
    server = rows.index("  - name: github-mcp  # converted: MCP server github-mcp: moved to spec.mcp_servers")
    toolsets = next(n for n, row in enumerate(rows) if "# X-MCP-Toolsets pins" in row)
    coding = next(n for n, row in enumerate(rows) if "# code:write runs the coding profile" in row)
    assert rows.index("  mcp_servers:") < toolsets < server
    assert rows[coding + 4].startswith(
        "  - name: code.open_workspace  # converted: workspace_task code:write"
    )
    assert "workspace_task.code:write gates github.create_pull_request (asked with its diff" in "\n".join(
        rows
    )


def test_convert_names_what_it_could_not_carry() -> None:
    repo = SEEDS / "repo-237c131" / "agents" / "dev-platform.yaml"
    assert "  # not carried: spec.tools[0].permissions[2]: no github tool here needs pulls:read" in converted(
        repo
    )


def test_convert_leaves_a_file_in_todays_form_as_it_is() -> None:
    for path in EXAMPLES_DIR.glob("*.yaml"):
        assert converted(path) == path.read_text().splitlines(), path


def test_convert_rewrites_every_document_of_a_file(tmp_path: Path) -> None:
    one = UNIT_DATA.read_text()
    path = tmp_path / "two.yaml"
    path.write_text(one + "---\n" + one.replace("name: dev-platform", "name: second"))
    rows = converted(path)
    assert sum("# converted: surface list item: surfaces.discord" in row for row in rows) == 2
    out = tmp_path / "out.yaml"
    out.write_text("\n".join(rows) + "\n")
    names = [a.name for a in load_agent_documents(out, tools=TOOLS)]
    assert names == ["dev-platform", "second"]


def test_convert_rewrites_a_document_written_as_one_flow_mapping(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(
        "# kept\n{apiVersion: openloop.team/v1alpha1, kind: Agent, metadata: {name: a, id: x},"
        " spec: {surfaces: [{type: discord, channel: eng}]}}  # and this\n"
    )
    rows = converted(path)
    assert rows[:2] == ["# kept", "# and this"]
    assert any(row.startswith("# warning: metadata.id: not used here") for row in rows)
    out = tmp_path / "out.yaml"
    out.write_text("\n".join(rows) + "\n")
    assert load(out)[0].apiVersion == "openloop.ai/v1alpha1"
