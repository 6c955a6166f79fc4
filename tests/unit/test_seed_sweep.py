"""Constructs found in real seed-system files beyond the fixtures, each reproduced with a
minimal file: what they mean here is kept, and nothing is dropped without a word."""

from __future__ import annotations

from pathlib import Path

import yaml

from activities.tools.catalog import tool_permissions
from config.loader import converted_documents, expanded_documents, load_agent_file
from config.seed_convert import convert_text
from config.seed_form_back import to_seed_form
from config.skills import load_skill

TOOLS = tool_permissions()

# The README of PyPI pyopenloop 0.1.1 (its "Example: agent config"): the agent is granted
# pulls:read but its approvals gate github.pulls:write, which no granted tool needs.
GATES_NOTHING = """\
apiVersion: openloop.team/v1alpha1
kind: Agent
metadata: { name: dev-platform, workspace: acme }
spec:
  model_policy:
    default: anthropic/claude-sonnet-4-6
  tools:
    - { name: github, type: native, permissions: ["issues:write", "pulls:read"] }
  approvals:
    require_for: ["github.issues:write", "github.pulls:write"]
    approvers: ["@maciag.artur"]
"""


def test_convert_says_where_an_approval_rule_that_gates_nothing_went(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(GATES_NOTHING)
    converted = convert_text(GATES_NOTHING, expanded_documents(path, tools=TOOLS))
    assert (
        "  # not carried: spec.approvals.require_for[1]: github.pulls:write gates nothing: "
        "no granted tool needs pulls:write\n  approvals:\n"
    ) in converted
    again = tmp_path / "converted.yaml"
    again.write_text(converted)
    agent = load_agent_file(again, tools=TOOLS)
    assert agent == load_agent_file(path, tools=TOOLS)
    assert agent.spec.approvals.require_for == ["github.create_issue", "github.comment"]


def skill(root: Path, allowed: str) -> Path:
    folder = root / "review"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        f"---\nname: review\ndescription: Review a change.\nallowed-tools: {allowed}\n---\nRead it.\n"
    )
    return folder


def test_claude_code_tool_names_do_not_narrow_the_agent_to_nothing(tmp_path: Path) -> None:
    # github.com/trailofbits/skills (plugins/*/skills/*/SKILL.md): Claude Code's tool names,
    # comma-separated as in `allowed-tools: Bash, Read, Write, Edit, Glob, Grep`.
    loaded = load_skill(skill(tmp_path, "Bash, Read, Write, Edit, Glob, Grep"))
    assert loaded.allowed_tools == ()
    (warning,) = loaded.warnings
    assert (warning.line, warning.field) == (4, "allowed-tools")
    assert warning.message.startswith("Bash, Read, Write, Edit, Glob, Grep name no tool here")
    assert "the agent keeps its tools" in warning.message


def test_our_tool_names_are_kept_next_to_foreign_ones_with_arguments(tmp_path: Path) -> None:
    # The spec's space-separated form; a Claude Code argument list holds spaces and dots.
    loaded = load_skill(skill(tmp_path, "Bash(./scripts/setup.sh:*) github.get_job_log, Read"))
    assert loaded.allowed_tools == ("github.get_job_log",)
    (warning,) = loaded.warnings
    assert warning.message.startswith("Bash(./scripts/setup.sh:*), Read name no tool here")
    assert "the agent is narrowed to github.get_job_log" in warning.message


def test_a_string_of_our_tool_names_is_split_without_a_warning(tmp_path: Path) -> None:
    loaded = load_skill(skill(tmp_path, "github.get_job_log code.read_file"))
    assert (loaded.allowed_tools, loaded.warnings) == (("github.get_job_log", "code.read_file"), ())


# agents/dev-platform.yaml of github.com/p1c2u/openloop at d4c0147 (the coding worker's first
# version, not among the fixtures): its coding tools open the workspace first.
CODING_WORKER = """\
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: { name: dev-platform, workspace: acme }
spec:
  surfaces:
    - { type: github, repo: acme/app }
  model_policy: { default: anthropic/claude-sonnet-4-6 }
  tools:
    - name: coding_worker
      type: native
      permissions: ["pr:write"]
"""


def test_to_seed_form_keeps_the_order_tools_are_offered(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(CODING_WORKER)
    agent = load_agent_file(path, tools=TOOLS)
    assert agent.spec.tools[0].name == "code.open_workspace"
    seed = [to_seed_form(d, TOOLS) for d in converted_documents(path, tools=TOOLS)]
    again = tmp_path / "seed.yaml"
    again.write_text(yaml.safe_dump_all(seed, sort_keys=False))
    assert load_agent_file(again, tools=TOOLS) == agent
