"""`openloop agents validate|apply|list|show` against the session's real PostgreSQL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from config.loader import EXAMPLES_DIR
from config.settings import Settings
from surfaces.cli.main import app

MINIMAL = (EXAMPLES_DIR / "minimal.yaml").read_text()


@pytest.fixture
def cli_env(pg_url: str, tmp_path: Path) -> dict[str, str]:
    # A URL of its own (same database): the CLI runs its own event loop per command, so
    # it must not be handed a pool another test opened on the session's loop.
    separator = "&" if "?" in pg_url else "?"
    return {
        "OPENLOOP_DATABASE_URL": f"{pg_url}{separator}application_name=openloop-cli-test",
        "OPENLOOP_STATE_DIR": str(tmp_path / "state"),
        "COLUMNS": "200",
    }


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def agent_file(tmp_path: Path, name: str, instructions: str = "Be brief.") -> Path:
    document = yaml.safe_load(MINIMAL)
    document["metadata"]["name"] = name
    document["spec"]["instructions"] = instructions
    path = tmp_path / f"{name}-{uuid.uuid4().hex[:4]}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def unique_name() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


def test_validate_good_files_needs_no_database(runner: CliRunner, tmp_path: Path) -> None:
    env = {"OPENLOOP_DATABASE_URL": "", "OPENLOOP_STATE_DIR": str(tmp_path), "COLUMNS": "200"}
    good = [str(p) for p in sorted(EXAMPLES_DIR.glob("*.yaml"))]
    result = runner.invoke(app, ["agents", "validate", *[a for p in good for a in ("-f", p)]], env=env)
    assert result.exit_code == 0, result.output
    for path in good:
        assert f"{path}: OK" in result.output
    assert "dev-platform (acme)" in result.output and "helper (default)" in result.output
    assert "warning" not in result.output  # the shipped examples gate every write


def test_validate_warns_about_unguarded_writes(runner: CliRunner, tmp_path: Path) -> None:
    document = yaml.safe_load(MINIMAL)
    document["metadata"]["name"] = "loose"
    document["spec"]["tools"] += [
        {"name": "slack.post_message", "permissions": ["chat:write"]},
        {"name": "github.comment", "permissions": ["issues:write"], "limit_to": ["acme/platform"]},
    ]
    path = tmp_path / "loose.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    env = {"OPENLOOP_DATABASE_URL": "", "OPENLOOP_STATE_DIR": str(tmp_path), "COLUMNS": "300"}
    result = runner.invoke(app, ["agents", "validate", "-f", str(path)], env=env)
    assert result.exit_code == 0, result.output  # a warning, not a failure
    assert "warning loose: slack.post_message writes but is neither in approvals.require_for" in result.output
    assert "github.comment writes" not in result.output  # limited to named repositories
    assert "memory.save writes" not in result.output  # gated in the minimal example


def test_validate_bad_file_lists_each_problem(
    runner: CliRunner, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    good = agent_file(tmp_path, unique_name())
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL.replace("scope: channel", "scope: galaxy").replace("ttl: 72h", "ttl: soon"))
    result = runner.invoke(app, ["agents", "validate", "-f", str(good), "-f", str(bad)], env=cli_env)
    assert result.exit_code == 1
    assert f"{good}: OK" in result.output
    assert f"{bad}: 2 problems" in result.output
    lines = MINIMAL.splitlines()
    scope_line = next(n for n, line in enumerate(lines, 1) if "scope: channel" in line)
    ttl_line = next(n for n, line in enumerate(lines, 1) if "ttl: 72h" in line)
    assert f"{bad}:{scope_line}: spec.memory.scope: allowed values are" in result.output
    assert f"{bad}:{ttl_line}: spec.approvals.ttl: 'soon' is not a duration" in result.output
    assert "Traceback" not in result.output


def test_apply_with_a_bad_file_applies_nothing(
    runner: CliRunner, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    name = unique_name()
    good = agent_file(tmp_path, name)
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: openloop.ai/v1alpha1\nkind: Agent\n")
    result = runner.invoke(app, ["agents", "apply", "-f", str(good), "-f", str(bad)], env=cli_env)
    assert result.exit_code == 1
    assert "metadata: required field is missing" in result.output
    assert "nothing applied" in result.output
    shown = runner.invoke(app, ["agents", "show", name], env=cli_env)
    assert shown.exit_code == 1
    assert f"no agent named {name!r}" in shown.output


def test_apply_versions_list_and_show(runner: CliRunner, tmp_path: Path, cli_env: dict[str, str]) -> None:
    name = unique_name()
    first = agent_file(tmp_path, name, "First instructions.")

    result = runner.invoke(app, ["agents", "apply", "-f", str(first)], env=cli_env)
    assert result.exit_code == 0, result.output
    assert f"{name}  workspace default  version 1  applied" in result.output

    again = runner.invoke(app, ["agents", "apply", "-f", str(first)], env=cli_env)
    assert again.exit_code == 0, again.output
    assert f"{name}  workspace default  version 1  unchanged" in again.output

    changed = agent_file(tmp_path, name, "Second instructions.")
    result = runner.invoke(app, ["agents", "apply", "-f", str(changed)], env=cli_env)
    assert result.exit_code == 0, result.output
    assert f"{name}  workspace default  version 2  applied" in result.output

    listed = runner.invoke(app, ["agents", "list"], env=cli_env)
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if name in line)
    assert "│ default" in row and "│ 2 " in row and "offline/demo" in row and "cli" in row

    latest = runner.invoke(app, ["agents", "show", name], env=cli_env)
    assert latest.exit_code == 0, latest.output
    assert "memory embedding: offline/hashing-256 (offline, no key needed)" in latest.output
    assert "version 2" in latest.output
    shown = yaml.safe_load(latest.stdout)  # the header is comments: the output is valid YAML
    assert shown["metadata"]["name"] == name
    assert shown["spec"]["instructions"] == "Second instructions."

    old = runner.invoke(app, ["agents", "show", name, "--version", "1"], env=cli_env)
    assert old.exit_code == 0, old.output
    assert yaml.safe_load(old.stdout)["spec"]["instructions"] == "First instructions."
    assert "version 1" in old.output

    as_json = runner.invoke(app, ["agents", "show", name, "-o", "json"], env=cli_env)
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    assert document["version"] == 2
    assert document["memory_embedding"] == "offline/hashing-256 (offline, no key needed)"
    assert document["config"]["spec"]["instructions"] == "Second instructions."

    missing = runner.invoke(app, ["agents", "show", name, "--version", "9"], env=cli_env)
    assert missing.exit_code == 1
    assert "has no version 9; versions: 1, 2" in missing.output


def test_apply_several_agents_from_one_file(
    runner: CliRunner, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    names = [unique_name(), unique_name()]
    path = tmp_path / "two.yaml"
    path.write_text("---\n".join(agent_file(tmp_path, n).read_text() for n in names))
    result = runner.invoke(app, ["agents", "apply", "-f", str(path)], env=cli_env)
    assert result.exit_code == 0, result.output
    for name in names:
        assert f"{name}  workspace default  version 1  applied" in result.output


def test_missing_database_is_one_clear_line(runner: CliRunner, tmp_path: Path) -> None:
    env = {"OPENLOOP_DATABASE_URL": "", "OPENLOOP_STATE_DIR": str(tmp_path / "none")}
    for command in (["agents", "list"], ["agents", "show", "x"]):
        result = runner.invoke(app, command, env=env)
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert len(lines) == 1, result.output
        assert "openloop up" in lines[0] and "OPENLOOP_DATABASE_URL" in lines[0]
    good = agent_file(tmp_path, unique_name())
    result = runner.invoke(app, ["agents", "apply", "-f", str(good)], env=env)
    assert result.exit_code == 2
    assert "OPENLOOP_DATABASE_URL" in result.output and "Traceback" not in result.output


def test_unreachable_database_fails_fast(runner: CliRunner, tmp_path: Path) -> None:
    env = {
        "OPENLOOP_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "OPENLOOP_STATE_DIR": str(tmp_path),
    }
    result = runner.invoke(app, ["agents", "list"], env=env)
    assert result.exit_code == 2
    assert "cannot reach the database" in result.output and "openloop up" in result.output


def bound_file(tmp_path: Path, name: str, channel: str) -> Path:
    document = yaml.safe_load(MINIMAL)
    document["metadata"]["name"] = name
    document["spec"].setdefault("surfaces", {})["slack"] = {"channels": [channel]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_two_agents_never_answer_for_the_same_channel(
    runner: CliRunner, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    first, second, third = unique_name(), unique_name(), unique_name()
    assert (
        runner.invoke(
            app, ["agents", "apply", "-f", str(bound_file(tmp_path, first, channel))], env=cli_env
        ).exit_code
        == 0
    )

    taken = runner.invoke(
        app, ["agents", "apply", "-f", str(bound_file(tmp_path, second, channel))], env=cli_env
    )
    assert taken.exit_code == 1
    assert f"agent '{second}' claims Slack channel {channel}" in taken.output
    assert f"agent '{first}'" in taken.output and "remove it from one of them" in taken.output
    both = runner.invoke(
        app,
        [
            "agents",
            "apply",
            "-f",
            str(bound_file(tmp_path, third, channel + "X")),
            "-f",
            str(bound_file(tmp_path, second, channel + "X")),
        ],
        env=cli_env,
    )
    assert both.exit_code == 1 and "nothing applied" in both.output
    listed = runner.invoke(app, ["agents", "list"], env=cli_env).output
    assert first in listed and second not in listed and third not in listed

    # The agent that holds the channel may re-apply it, and may hand it over.
    moved = bound_file(tmp_path, first, channel + "Y")
    assert runner.invoke(app, ["agents", "apply", "-f", str(moved)], env=cli_env).exit_code == 0
    assert (
        runner.invoke(
            app, ["agents", "apply", "-f", str(bound_file(tmp_path, second, channel))], env=cli_env
        ).exit_code
        == 0
    )


async def test_the_store_refuses_a_second_agent_for_a_repo_even_without_the_cli(
    db_settings: Settings,
) -> None:
    from activities.store.agents import BindingConflict, apply_agent
    from activities.store.db import get_pool
    from config.agent import AgentConfig

    repo = f"acme/{uuid.uuid4().hex[:8]}"

    def bound(name: str, spelled: str) -> AgentConfig:
        return AgentConfig.model_validate(
            {
                "apiVersion": "openloop.ai/v1alpha1",
                "kind": "Agent",
                "metadata": {"name": name},
                "spec": {"surfaces": {"github": {"repos": [spelled]}}},
            }
        )

    pool = await get_pool(db_settings.require_database_url())
    await apply_agent(pool, bound(unique_name(), repo))
    with pytest.raises(BindingConflict, match=f"GitHub repo {repo}"):
        await apply_agent(pool, bound(unique_name(), repo.upper()))  # repos are case-blind
