"""`openloop agents apply` with pyopenloop's own agent files, unchanged: each applies with
its warnings printed, and the stored agent holds the mapped MCP servers, tools, approvals
and routes (Slack names through the fake Slack API, the session's real PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg_pool import AsyncConnectionPool
from typer.testing import CliRunner

from activities.store.agents import agent_for_discord_channel, agent_for_slack_channel
from surfaces.cli.main import app
from tests.fakes.slack_api import FakeSlack

TOKEN = "xoxb-pyopenloop-test"
SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds" / "pyopenloop"
NEWEST = SEEDS / "pypi-0.1.1" / "agents" / "dev-platform.yaml"
REPO = SEEDS / "repo-237c131" / "agents" / "dev-platform.yaml"


@pytest.fixture
def channel() -> str:
    return f"C{uuid.uuid4().hex[:8].upper()}"  # #dev-platform, its own id in each test


@pytest.fixture
def slack(channel: str) -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        server.add_channel(channel, "dev-platform")
        server.add_user("U0ARTUR", "maciag.artur", "Artur")
        yield server


@pytest.fixture
def env(pg_url: str, tmp_path: Path, slack: FakeSlack) -> dict[str, str]:
    # Both files bind Discord's #eng: one of them may hold it at a time, as two agents of a
    # team would be told at apply. Each test starts with neither.
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            "DELETE FROM agents WHERE (workspace, name) IN "
            "(('openloop-team', 'openloop'), ('acme', 'dev-platform'))"
        )
    separator = "&" if "?" in pg_url else "?"
    return {
        "OPENLOOP_DATABASE_URL": f"{pg_url}{separator}application_name=openloop-cli-test",
        "OPENLOOP_STATE_DIR": str(tmp_path / "state"),
        "SLACK_BOT_TOKEN": TOKEN,
        "OPENLOOP_SLACK_API_URL": slack.base_url,
        "COLUMNS": "250",
    }


def applied(path: Path, name: str, workspace: str, env: dict[str, str]) -> tuple[str, dict[str, Any]]:
    runner = CliRunner()
    result = runner.invoke(app, ["agents", "apply", "-f", str(path)], env=env)
    assert result.exit_code == 0, result.output
    assert f"{name}  workspace {workspace}  version" in result.output
    shown = runner.invoke(app, ["agents", "show", name, "--workspace", workspace], env=env)
    assert shown.exit_code == 0, shown.output
    return result.output, yaml.safe_load(shown.stdout)["spec"]


def line_of(path: Path, needle: str) -> int:
    return next(n for n, row in enumerate(path.read_text().splitlines(), 1) if needle in row)


def test_the_newest_file_applies_with_its_mcp_server_and_coding_tools(
    env: dict[str, str], channel: str
) -> None:
    output, spec = applied(NEWEST, "openloop", "openloop-team", env)
    assert "spec.surfaces" not in output  # the discord line binds its channel now
    assert spec["surfaces"]["discord"]["channels"] == ["eng"]
    assert f"warning {NEWEST}:{line_of(NEWEST, '  id: ')}: metadata.id: not used here" in output
    assert spec["surfaces"]["slack"]["channels"] == [channel]
    assert spec["mcp_servers"] == [
        {
            "name": "github-mcp",
            "transport": "streamable-http",
            "url": "https://api.githubcopilot.com/mcp/",
            "command": None,
            "headers_from_env": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
            "headers": {"X-MCP-Readonly": "true", "X-MCP-Toolsets": "issues,pull_requests,actions"},
            "env_from": [],
            "allow": [
                "list_issues",
                "issue_read",
                "search_issues",
                "list_pull_requests",
                "pull_request_read",
                "actions_list",
                "actions_get",
                "get_job_logs",
            ],
            "writes": [],
            "timeout": "30s",
            "required": False,
        }
    ]
    names = [tool["name"] for tool in spec["tools"]]
    assert names[:3] == ["github.create_issue", "github.comment", "github.create_pull_request"]
    assert names[3:] == [
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
    assert spec["approvals"]["require_for"] == [
        "github.create_issue",
        "github.comment",
        "github.create_pull_request",
    ]
    assert spec["approvals"]["approvers"] == ["U0ARTUR"]
    assert [r["match"]["task"] for r in spec["model_policy"]["routes"]] == [
        "summarize",
        "code",
        "investigate_ci",
    ]
    assert (spec["limits"]["max_concurrent_tasks"], spec["limits"]["tasks_per_minute"]) == (4, 30)


def test_the_repository_file_applies_with_coding_worker_and_its_ci_logs_server(
    env: dict[str, str], channel: str
) -> None:
    output, spec = applied(REPO, "dev-platform", "acme", env)
    assert "spec.surfaces" not in output
    # A message in Discord's #eng (by its name, as the file writes it) and one in the Slack
    # channel both reach this agent.
    assert asyncio.run(_bound(env["OPENLOOP_DATABASE_URL"], channel)) == ("dev-platform", "dev-platform")
    assert [(s["name"], s["url"], s["allow"]) for s in spec["mcp_servers"]] == [
        ("ci-logs", "http://localhost:8931", ["get_run_logs", "list_runs"])
    ]
    names = [tool["name"] for tool in spec["tools"]]
    assert "code.edit_file" in names and "github.create_pull_request" in names
    assert "github.create_pull_request" in spec["approvals"]["require_for"]
    assert spec["model_policy"]["routes"][2] == {
        "match": {"task": "investigate_ci"},
        "model": "anthropic/claude-sonnet-4-6",
    }


async def _bound(database_url: str, slack_channel: str) -> tuple[str | None, str | None]:
    pool = AsyncConnectionPool(database_url, open=False)
    await pool.open()
    try:
        discord = await agent_for_discord_channel(pool, "1200000000000000010", "eng")
        slack = await agent_for_slack_channel(pool, slack_channel)
    finally:
        await pool.close()
    return (discord.name if discord else None, slack.name if slack else None)


def test_validate_prints_each_warning_and_succeeds(env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["agents", "validate", "-f", str(NEWEST)], env=env)
    assert result.exit_code == 0, result.output
    assert f"{NEWEST}: OK: openloop (openloop-team)" in result.output
    assert "code.open_workspace has nothing to open" in result.output


def test_convert_writes_a_file_that_applies(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "converted.yaml"
    result = CliRunner().invoke(app, ["agents", "convert", "-f", str(NEWEST), "-o", str(out)], env=env)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "# Durable identity of record" in text and "# warning: metadata.id: not used here" in text
    output, spec = applied(out, "openloop", "openloop-team", env)
    # only what is still true of today's form: the coding tools have no repository yet
    warned = [row for row in output.splitlines() if "warning" in row]
    assert len(warned) == 1 and "code.open_workspace has nothing to open" in warned[0]
    assert spec["mcp_servers"][0]["headers_from_env"] == {"Authorization": "Bearer ${GITHUB_TOKEN}"}
