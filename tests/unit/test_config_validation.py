"""Bad agent files give problems naming the file, the line, the field path and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.tools.catalog import NATIVE_TOOLS, tool_permissions
from config.agent import AgentConfig
from config.loader import (
    EXAMPLES_DIR,
    AgentConfigError,
    ConfigProblem,
    load_agent_documents,
    load_agent_file,
    parse_agent,
)

TOOLS = tool_permissions()

BASE = """\
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: tester
  workspace: qa
spec:
  surfaces:
    slack:
      channels: [C0TEST]
    github:
      repos: [acme/platform]
  memory:
    scope: channel
  model_policy:
    default: offline/demo
    routes:
      - match: {task: summarize}
        model: offline/demo
  tools:
    - name: memory.search
      permissions: [memory:read]
    - name: github.create_issue
      permissions: [issues:write]
  approvals:
    require_for:
      - github.create_issue
    approvers: [cli:local]
    ttl: 72h
  budget:
    monthly_usd: 20
    per_task_usd: 0.5
    on_exceeded: block
  limits:
    max_iterations: 12
    wall_clock: 30m
"""


def line_of(text: str, fragment: str) -> int:
    """1-based number of the first line of `text` containing `fragment`."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if fragment in line)


def problems_of(tmp_path: Path, text: str) -> tuple[Path, list[ConfigProblem]]:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    with pytest.raises(AgentConfigError) as info:
        load_agent_documents(path, tools=TOOLS)
    for problem in info.value.problems:
        assert problem.file == str(path)
    return path, info.value.problems


def the_problem(problems: list[ConfigProblem], field: str) -> ConfigProblem:
    matching = [p for p in problems if p.field == field]
    assert matching, f"no problem at {field}; got: {[str(p) for p in problems]}"
    return matching[0]


def mutate(old: str, new: str) -> str:
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new)


def test_base_document_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(BASE)
    (config,) = load_agent_documents(path, tools=TOOLS)
    assert config.name == "tester" and config.workspace == "qa"
    assert load_agent_file(path, tools=TOOLS) == config


@pytest.mark.parametrize("path", sorted(EXAMPLES_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_examples_validate(path: Path) -> None:
    configs = load_agent_documents(path, tools=TOOLS)
    assert configs and all(isinstance(c, AgentConfig) for c in configs)


def test_tool_names_are_checked_against_the_catalog_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "unknown.yaml"
    path.write_text(mutate("- name: memory.search", "- name: memory.serch"))
    with pytest.raises(AgentConfigError, match="not a native tool"):
        load_agent_documents(path, tools=TOOLS)
    (read_back,) = load_agent_documents(path, tools=None)  # a stored agent is not re-checked
    assert read_back.spec.tool("memory.serch") is not None
    native = {name: tool.spec.permission for name, tool in NATIVE_TOOLS.items()}
    assert TOOLS == native | {
        "agent.delegate": "agents:delegate",
        "agent.ask_teammate": "agents:ask",
        "code.open_workspace": "code:read",
        "github.create_pull_request": "pulls:write",
    }


def test_unknown_key_names_line_field_and_allowed_keys(tmp_path: Path) -> None:
    text = mutate("  tools:\n", "  toolz: []\n  tools:\n")
    path, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.toolz")
    assert problem.line == line_of(text, "toolz")
    assert "did you mean 'tools'" in problem.message
    assert "allowed keys here: instructions, surfaces" in problem.message
    assert str(problem).startswith(f"{path}:{problem.line}: spec.toolz: unknown key 'toolz'")


def test_unknown_key_inside_a_list_item(tmp_path: Path) -> None:
    text = mutate("      permissions: [memory:read]\n", "      permisions: [memory:read]\n")
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.tools[0].permisions")
    assert problem.line == line_of(text, "permisions")
    assert "did you mean 'permissions'" in problem.message


def test_wrong_types(tmp_path: Path) -> None:
    text = mutate("max_iterations: 12", "max_iterations: many").replace(
        "channels: [C0TEST]", "channels: {a: 1}"
    )
    _, problems = problems_of(tmp_path, text)
    iterations = the_problem(problems, "spec.limits.max_iterations")
    assert iterations.line == line_of(text, "max_iterations")
    assert "valid integer" in iterations.message and "'many'" in iterations.message
    channels = the_problem(problems, "spec.surfaces.slack.channels")
    assert channels.line == line_of(text, "channels:")
    assert "expected a list" in channels.message


def test_section_that_is_not_a_mapping(tmp_path: Path) -> None:
    text = mutate(
        "  budget:\n    monthly_usd: 20\n    per_task_usd: 0.5\n    on_exceeded: block\n",
        "  budget: lots\n",
    )
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.budget")
    assert problem.line == line_of(text, "budget: lots")
    assert "expected a mapping" in problem.message


@pytest.mark.parametrize(
    ("old", "new", "field", "allowed"),
    [
        (
            "scope: channel",
            "scope: galaxy",
            "spec.memory.scope",
            "'channel', 'agent' or 'workspace'",
        ),
        (
            "on_exceeded: block",
            "on_exceeded: explode",
            "spec.budget.on_exceeded",
            "'block' or 'warn'",
        ),
        ("kind: Agent", "kind: Robot", "kind", "'Agent'"),
    ],
)
def test_invalid_enum_values_list_what_is_allowed(
    tmp_path: Path, old: str, new: str, field: str, allowed: str
) -> None:
    text = mutate(old, new)
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, field)
    assert problem.line == line_of(text, new)
    assert f"allowed values are {allowed}" in problem.message


def test_missing_required_fields(tmp_path: Path) -> None:
    text = mutate("  name: tester\n", "").replace("apiVersion: openloop.ai/v1alpha1\n", "")
    _, problems = problems_of(tmp_path, text)
    name = the_problem(problems, "metadata.name")
    assert name.line == line_of(text, "metadata:")
    assert "required field is missing" in name.message
    assert "add `apiVersion: openloop.ai/v1alpha1`" in the_problem(problems, "apiVersion").message


def test_approval_rule_for_a_tool_the_agent_lacks_points_at_require_for(tmp_path: Path) -> None:
    text = mutate(
        "      - github.create_issue\n", "      - github.create_issue\n      - slack.post_message\n"
    )
    path, problems = problems_of(tmp_path, text)
    assert [p.field for p in problems] == ["spec.approvals.require_for[1]"]
    problem = problems[0]
    assert problem.line == line_of(text, "- slack.post_message")
    assert "'slack.post_message' is not one of this agent's tools" in problem.message
    assert "memory.search, github.create_issue" in problem.message
    assert str(problem).startswith(f"{path}:{problem.line}: spec.approvals.require_for[1]: ")


def test_approval_rules_without_approvers(tmp_path: Path) -> None:
    text = mutate("    approvers: [cli:local]\n", "    approvers: []\n")
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.approvals.approvers")
    assert problem.line == line_of(text, "approvers: []")
    assert "name at least one user who may approve" in problem.message


def test_route_to_unknown_task_kind(tmp_path: Path) -> None:
    text = mutate("{task: summarize}", "{task: dance}")
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.model_policy.routes[0].match.task")
    assert problem.line == line_of(text, "task: dance")
    assert "unknown task kind 'dance'" in problem.message and "summarize" in problem.message


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("monthly_usd: 20", "monthly_usd: -20", "spec.budget.monthly_usd"),
        ("per_task_usd: 0.5", "per_task_usd: -0.5", "spec.budget.per_task_usd"),
    ],
)
def test_negative_budgets(tmp_path: Path, old: str, new: str, field: str) -> None:
    text = mutate(old, new)
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, field)
    assert problem.line == line_of(text, new)
    assert "negative values are not allowed" in problem.message


@pytest.mark.parametrize(
    ("old", "new", "field", "says"),
    [
        ("ttl: 72h", "ttl: 3 days", "spec.approvals.ttl", "is not a duration"),
        ("ttl: 72h", "ttl: 72", "spec.approvals.ttl", "72 is not a duration"),
        ("wall_clock: 30m", "wall_clock: soon", "spec.limits.wall_clock", "e.g. 90s, 30m"),
        ("wall_clock: 30m", "wall_clock: 0m", "spec.limits.wall_clock", "longer than zero"),
    ],
)
def test_bad_durations(tmp_path: Path, old: str, new: str, field: str, says: str) -> None:
    text = mutate(old, new)
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, field)
    assert problem.line == line_of(text, new)
    assert says in problem.message


def test_bad_repo_names_point_at_each_repo(tmp_path: Path) -> None:
    text = mutate(
        "repos: [acme/platform]",
        "repos:\n        - acme/platform\n        - acme\n        - 'has space/x'\n        - a/b/c",
    )
    _, problems = problems_of(tmp_path, text)
    assert [p.field for p in problems] == [f"spec.surfaces.github.repos[{i}]" for i in (1, 2, 3)]
    first = line_of(text, "- acme/platform")
    assert [p.line for p in problems] == [first + 1, first + 2, first + 3]
    assert all("write owner/name" in p.message for p in problems)


def test_unknown_native_tool(tmp_path: Path) -> None:
    text = mutate("- name: memory.search", "- name: memory.serch")
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.tools[0].name")
    assert problem.line == line_of(text, "memory.serch")
    assert "'memory.serch' is not a native tool" in problem.message
    assert "memory.search" in problem.message


def test_an_mcp_tool_in_tools_is_a_server_checked_at_the_line_written(tmp_path: Path) -> None:
    # pyopenloop's shape: the tool becomes an entry of spec.mcp_servers, named as written
    text = mutate(
        "  approvals:\n",
        "    - name: jira.lookup\n      type: mcp\n      server: http://127.0.0.1:9000/mcp\n  approvals:\n",
    )
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.tools[2].name")
    assert problem.line == line_of(text, "name: jira.lookup")
    assert "must be 1-32 lowercase letters, digits, - or _" in problem.message


def test_limit_to_may_only_narrow_the_agents_bindings(tmp_path: Path) -> None:
    text = mutate(
        "permissions: [issues:write]", "permissions: [issues:write]\n      limit_to: [acme/elsewhere]"
    )
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.tools[1].limit_to[0]")
    assert "'acme/elsewhere' is not one of this agent's channels or repositories" in problem.message


def test_permissions_must_grant_the_tools_scope(tmp_path: Path) -> None:
    text = mutate("permissions: [issues:write]", "permissions: [issues:read]")
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.tools[1].permissions")
    assert problem.line == line_of(text, "[issues:read]")
    assert "github.create_issue needs the permission 'issues:write'" in problem.message


def test_duplicate_tools_and_duplicate_yaml_keys(tmp_path: Path) -> None:
    text = mutate(
        "  approvals:\n",
        "    - name: memory.search\n      permissions: [memory:read]\n  approvals:\n",
    ).replace("    monthly_usd: 20\n", "    monthly_usd: 20\n    monthly_usd: 5\n")
    _, problems = problems_of(tmp_path, text)
    tool = the_problem(problems, "spec.tools[2].name")
    assert "already listed as tools[0]" in tool.message
    duplicate = the_problem(problems, "spec.budget.monthly_usd")
    assert duplicate.line == line_of(text, "monthly_usd: 5")
    assert f"first set on line {line_of(text, 'monthly_usd: 20')}" in duplicate.message


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    text = mutate("  memory:\n    scope: channel\n", "  memory:\n    scope: [channel\n")
    path, problems = problems_of(tmp_path, text)
    assert len(problems) == 1 and problems[0].message.startswith("not valid YAML")
    assert problems[0].line is not None and problems[0].line >= line_of(text, "[channel")


@pytest.mark.parametrize("text", ["just words\n", "- a\n- b\n"])
def test_document_that_is_not_a_mapping(tmp_path: Path, text: str) -> None:
    _, problems = problems_of(tmp_path, text)
    assert problems[0].message.startswith("not an agent document")


def test_empty_and_unreadable_files(tmp_path: Path) -> None:
    _, problems = problems_of(tmp_path, "# nothing here\n")
    assert "no agent documents" in problems[0].message
    with pytest.raises(AgentConfigError, match="cannot read"):
        load_agent_documents(tmp_path / "missing.yaml", tools=TOOLS)


def test_several_documents_in_one_file(tmp_path: Path) -> None:
    second = BASE.replace("name: tester", "name: tester-two")
    path = tmp_path / "two.yaml"
    path.write_text(BASE + "---\n" + second + "---\n")
    assert [c.name for c in load_agent_documents(path, tools=TOOLS)] == ["tester", "tester-two"]
    with pytest.raises(AgentConfigError, match="expected one agent document, found 2"):
        load_agent_file(path, tools=TOOLS)


def test_problem_in_second_document_has_its_own_line(tmp_path: Path) -> None:
    second = BASE.replace("name: tester", "name: tester-two").replace("scope: channel", "scope: x")
    text = BASE + "---\n" + second
    _, problems = problems_of(tmp_path, text)
    assert len(problems) == 1
    assert problems[0].document == 2 and problems[0].field == "spec.memory.scope"
    assert problems[0].line == line_of(text, "scope: x")
    assert "(document 2)" in str(problems[0])


def test_same_agent_twice_in_one_file(tmp_path: Path) -> None:
    text = BASE + "---\n" + BASE
    _, problems = problems_of(tmp_path, text)
    assert [p.field for p in problems] == ["metadata.name"]
    assert "already defined on line 4" in problems[0].message
    assert problems[0].line == len(BASE.splitlines()) + 1 + 4


def test_parse_agent_reports_all_problems_in_one_error() -> None:
    text = mutate("scope: channel", "scope: galaxy").replace("max_iterations: 12", "max_iterations: 0")
    with pytest.raises(AgentConfigError) as info:
        parse_agent(text, "inline.yaml")
    fields = {p.field for p in info.value.problems}
    assert fields == {"spec.memory.scope", "spec.limits.max_iterations"}
    assert all(line.startswith("inline.yaml:") for line in str(info.value).splitlines())


MCP = """\
  mcp_servers:
    - name: linear
      transport: streamable-http
      url: https://mcp.example.com/mcp
      headers_from_env: {Authorization: LINEAR_MCP_AUTH}
      allow: [list_issues, create_issue]
      writes: [create_issue]
      timeout: 30s
    - name: fs
      transport: stdio
      command: [python, -m, my_mcp_server]
      env_from: [MY_SERVER_TOKEN]
      allow: ["read_*"]
"""


def with_mcp(servers: str = MCP, require_for: str = '[linear.create_issue, "fs.*"]') -> str:
    return mutate("  approvals:\n", servers + f"  approvals:\n    require_for: {require_for}\n").replace(
        "    require_for:\n      - github.create_issue\n", ""
    )


def test_mcp_servers_validate_with_allow_lists_and_gated_globs(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text(with_mcp())
    (config,) = load_agent_documents(path, tools=TOOLS)
    linear = config.spec.mcp_server("linear")
    assert linear is not None and linear.allows("create_issue") and not linear.allows("delete_issue")
    assert linear.is_write("create_issue") and not linear.is_write("list_issues")


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        (("transport: stdio", "transport: sse"), "spec.mcp_servers[1].transport", "unknown transport 'sse'"),
        (("      url: https://mcp.example.com/mcp\n", ""), "spec.mcp_servers[0].url", "needs `url`"),
        (
            ("      command: [python, -m, my_mcp_server]\n", ""),
            "spec.mcp_servers[1].command",
            "needs `command`",
        ),
        (('allow: ["read_*"]', 'allow: ["fs.read_*"]'), "spec.mcp_servers[1].allow[0]", "can match no tool"),
        (
            ("allow: [list_issues, create_issue]", "allow: [list issues]"),
            "spec.mcp_servers[0].allow[0]",
            "can match no tool",
        ),
        (
            ("Authorization: LINEAR_MCP_AUTH", "Authorization: Bearer lin_api_123"),
            "spec.mcp_servers[0].headers_from_env.Authorization",
            "never the value itself",
        ),
        (
            ("url: https://mcp.example.com/mcp", "url: https://mcp.example.com/mcp?token=abc"),
            "spec.mcp_servers[0].url",
            "holds a secret",
        ),
        (
            ("writes: [create_issue]", "writes: [delete_issue]"),
            "spec.mcp_servers[0].writes[0]",
            "names no allowed tool",
        ),
    ],
)
def test_mcp_server_problems_name_their_field_and_line(
    tmp_path: Path, change: tuple[str, str], field: str, fragment: str
) -> None:
    text = with_mcp().replace(*change)
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, field)
    assert fragment in problem.message and problem.line is not None


def test_require_for_must_name_an_allowed_mcp_tool(tmp_path: Path) -> None:
    text = with_mcp(require_for="[linear.delete_issue]")
    _, problems = problems_of(tmp_path, text)
    problem = the_problem(problems, "spec.approvals.require_for[0]")
    assert "'linear.delete_issue' is not one of this agent's tools" in problem.message
    assert problem.line == line_of(text, "linear.delete_issue")
