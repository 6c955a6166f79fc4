"""`openloop agents validate|apply|convert` with a seed-form agent file: Slack names resolved
through the (fake) Slack API at apply, against the session's real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from surfaces.cli.main import app
from tests.fakes.slack_api import FakeSlack

TOKEN = "xoxb-seed-form-test"

# The shapes of the agent files the system we replace documents (in our own words), minus
# the surface this release does not serve.
SEED = """\
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: { name: NAME, workspace: demo }
spec:
  surfaces:
    - { type: slack, channel: "#CHANNEL" }
    - { type: github, repo: demo/REPO }
  memory: { scope: channel, backend: postgres, retention_days: 60 }
  model_policy:
    default: openai/gpt-4o-mini
    routes:
      - { match: { task: code }, model: anthropic/claude-sonnet-4-5 }
  tools:
    - { name: github, type: native, permissions: ["issues:write", "pulls:read"] }
    - { name: memory, type: native, permissions: ["memory:read", "memory:write"] }
  approvals:
    require_for: ["github.issues:write", "github.pulls:write", "memory.memory:write"]
    approvers: ["@sam", "@oncall"]
  budget: { monthly_usd: 40, per_task_usd: 0.40, on_exceeded: block }
"""


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN, page_size=2) as server:  # small pages: the listings page
        for number, channel in enumerate(["random", "general", "announcements"]):
            server.add_channel(f"C0{number}{channel.upper()}", channel)
        server.add_channel("C0OLD", "old", archived=True)
        server.add_user("U0SAM", "sam", "Sam Lee")
        server.add_user("U0KIM", "kim", "Kim Park")
        server.add_user("U0ROB", "rob", "Rob Diaz")
        server.set_usergroup("S0ONCALL", ["U0KIM", "U0SAM"], handle="oncall")
        yield server


@pytest.fixture
def env(pg_url: str, tmp_path: Path, slack: FakeSlack) -> dict[str, str]:
    separator = "&" if "?" in pg_url else "?"
    return {
        "OPENLOOP_DATABASE_URL": f"{pg_url}{separator}application_name=openloop-cli-test",
        "OPENLOOP_STATE_DIR": str(tmp_path / "state"),
        "SLACK_BOT_TOKEN": TOKEN,
        "OPENLOOP_SLACK_API_URL": slack.base_url,
        "COLUMNS": "250",
    }


def seed_file(tmp_path: Path, slack: FakeSlack, private: bool = False) -> tuple[Path, str, str]:
    """A seed-form agent of its own (name, channel, repo), its channel known to Slack."""
    suffix = uuid.uuid4().hex[:8]
    name, channel = f"seed-{suffix}", f"infra-{suffix}"
    slack.add_channel(f"C{suffix.upper()}", channel, is_private=private)
    path = tmp_path / f"{name}.yaml"
    text = SEED.replace("NAME", name).replace("CHANNEL", channel).replace("REPO", f"infra-{suffix}")
    path.write_text(text)
    return path, name, f"C{suffix.upper()}"


def test_apply_resolves_slack_names_through_slack(
    tmp_path: Path, slack: FakeSlack, env: dict[str, str]
) -> None:
    runner = CliRunner()
    path, name, channel_id = seed_file(tmp_path, slack, private=True)
    result = runner.invoke(app, ["agents", "apply", "-f", str(path)], env=env)
    assert result.exit_code == 0, result.output
    assert f"{name}  workspace demo  version 1  applied" in result.output

    shown = runner.invoke(app, ["agents", "show", name], env=env)
    assert shown.exit_code == 0, shown.output
    spec = yaml.safe_load(shown.stdout)["spec"]
    assert spec["surfaces"]["slack"]["channels"] == [channel_id]
    # @oncall stays the group (its id): whoever is in it when a request is made may approve.
    assert spec["approvals"]["approvers"] == ["U0SAM", "S0ONCALL"]
    assert [t["name"] for t in spec["tools"]] == [
        "github.create_issue",
        "github.comment",
        "memory.search",
        "memory.save",
    ]
    assert spec["approvals"]["require_for"] == ["github.create_issue", "github.comment", "memory.save"]
    assert spec["model_policy"]["routes"][0]["match"]["task"] == "code"
    # every page of each listing, read once
    assert len(slack.calls_to("conversations.list")) > 1
    assert len(slack.calls_to("users.list")) > 1
    assert len(slack.calls_to("usergroups.list")) == 1

    again = runner.invoke(app, ["agents", "apply", "-f", str(path)], env=env)
    assert again.exit_code == 0, again.output
    assert f"{name}  workspace demo  version 1  unchanged" in again.output


def test_a_name_slack_does_not_know_applies_nothing(
    tmp_path: Path, slack: FakeSlack, env: dict[str, str]
) -> None:
    path, name, _ = seed_file(tmp_path, slack)
    text = path.read_text().replace("@sam", "@nobody")
    path.write_text(text)
    result = CliRunner().invoke(app, ["agents", "apply", "-f", str(path)], env=env)
    assert result.exit_code == 1
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "@nobody" in row)
    assert (
        f"{path}:{line}: spec.approvals.approvers[0]: no Slack user or user group with the handle @nobody"
        in (result.output)
    )
    assert "nothing applied" in result.output
    assert CliRunner().invoke(app, ["agents", "show", name], env=env).exit_code == 1


def test_a_discord_line_binds_the_channel_and_an_unknown_surface_is_refused_at_its_line(
    tmp_path: Path, slack: FakeSlack, env: dict[str, str]
) -> None:
    path, name, _ = seed_file(tmp_path, slack)
    text = path.read_text().replace("  memory:", '    - { type: discord, channel: "ops" }\n  memory:', 1)
    path.write_text(text)
    result = CliRunner().invoke(app, ["agents", "apply", "-f", str(path)], env=env)
    assert result.exit_code == 0, result.output
    assert "not served" not in result.output
    assert f"{name}  workspace demo  version 1  applied" in result.output
    shown = CliRunner().invoke(app, ["agents", "show", name, "-o", "yaml"], env=env)
    assert "discord:" in shown.output and "- ops" in shown.output, shown.output

    teams = text.replace('type: discord, channel: "ops"', 'type: teams, channel: "ops"')
    path.write_text(teams)
    refused = CliRunner().invoke(app, ["agents", "apply", "-f", str(path)], env=env)
    assert refused.exit_code != 0
    line = next(n for n, row in enumerate(teams.splitlines(), 1) if "teams" in row)
    assert f"{path}:{line}" in refused.output
    assert "surface 'teams' is not served by this release" in refused.output


def test_validate_without_slack_accepts_names_for_apply(tmp_path: Path, slack: FakeSlack) -> None:
    path, name, _ = seed_file(tmp_path, slack)
    env = {
        "OPENLOOP_DATABASE_URL": "",
        "OPENLOOP_STATE_DIR": str(tmp_path),
        "SLACK_BOT_TOKEN": "",
        "COLUMNS": "250",
    }
    result = CliRunner().invoke(app, ["agents", "validate", "-f", str(path)], env=env)
    assert result.exit_code == 0, result.output
    assert f"{path}: OK: {name} (demo)" in result.output
    assert (
        "#infra-" in result.output
        and "@sam, @oncall will be resolved through Slack at apply" in result.output
    )
    assert slack.calls == []


def test_convert_prints_todays_form(tmp_path: Path, slack: FakeSlack) -> None:
    path, name, _ = seed_file(tmp_path, slack)
    result = CliRunner().invoke(app, ["agents", "convert", "-f", str(path)], env={"SLACK_BOT_TOKEN": ""})
    assert result.exit_code == 0, result.output
    today = yaml.safe_load(result.stdout)
    assert today["metadata"]["name"] == name
    assert today["spec"]["surfaces"]["github"] == {"repos": [f"demo/{name.replace('seed', 'infra')}"]}
    assert today["spec"]["approvals"]["require_for"] == [
        "github.create_issue",
        "github.comment",
        "memory.save",
    ]
    back = CliRunner().invoke(app, ["agents", "convert", "-f", str(path), "--to", "seed"])
    assert back.exit_code == 0, back.output
    assert yaml.safe_load(back.stdout)["spec"]["tools"] == [
        {"name": "github", "type": "native", "permissions": ["issues:write"]},
        {"name": "memory", "type": "native", "permissions": ["memory:read", "memory:write"]},
    ]
