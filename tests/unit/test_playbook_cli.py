"""`openloop playbooks compile|init`: the DAG shown, every problem printed, exit 1 on errors."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from surfaces.cli.main import app

ENV = {"COLUMNS": "200"}


def test_without_a_playbooks_folder_compile_shows_the_shipped_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["playbooks", "compile"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "no ./playbooks folder here: compiling the shipped examples" in result.output
    assert "agents from" in result.output and "dev-platform" in result.output
    assert 'nightly-deps  on cron("0 3 * * *", tz="Europe/Berlin")' in result.output
    assert "ci-triage  on CIFailed (github)" in result.output
    assert "propose  after investigate · agent coder · $2.00" in result.output
    assert "3 playbooks compiled, 0 error(s), 0 warning(s)" in result.output


def test_init_then_compile_then_a_broken_step_exits_1_naming_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(app, ["playbooks", "init"], env=ENV).exit_code == 0
    assert (tmp_path / "playbooks/ci-triage/investigate.md").is_file()
    again = runner.invoke(app, ["playbooks", "init"], env=ENV)
    assert again.exit_code == 1 and "already exists" in again.output
    shipped = Path(__file__).resolve().parents[2] / "config" / "agents"
    compiled = runner.invoke(app, ["playbooks", "compile", "--agents", str(shipped)], env=ENV)
    assert compiled.exit_code == 0 and "no ./playbooks folder" not in compiled.output, compiled.output
    step = tmp_path / "playbooks/ci-triage/propose.md"
    step.write_text(step.read_text().replace("after: investigate", "after: investigat"))
    broken = runner.invoke(app, ["playbooks", "compile", "--dir", "playbooks"], env=ENV)
    assert broken.exit_code == 1
    assert "playbooks/ci-triage/propose.md:2: after: no step 'investigat'" in broken.output
    assert "did you mean 'investigate'?" in broken.output
    assert "agents were not checked" in broken.output  # no agents given, no ./agents folder


def test_compile_checks_against_the_agents_applied_on_the_stack(tmp_path: Path, pg_url: str) -> None:
    name = f"loose-{uuid.uuid4().hex[:6]}"
    agent = tmp_path / "loose.yaml"
    agent.write_text(
        f"apiVersion: openloop.ai/v1alpha1\nkind: Agent\nmetadata: {{name: {name}}}\nspec:\n  tools:\n"
        "    - {name: github.create_issue, permissions: ['issues:write']}\n"
    )
    env = {**ENV, "OPENLOOP_DATABASE_URL": pg_url}
    runner = CliRunner()
    applied = runner.invoke(app, ["agents", "apply", "-f", str(agent)], env=env)
    assert applied.exit_code == 0, applied.output
    step = tmp_path / "playbooks/nightly/file.md"
    step.parent.mkdir(parents=True)
    step.write_text(
        f'---\non: cron("0 3 * * *")\nagent: {name}\n---\nFile an issue at {{{{ event.scheduled_at }}}}.\n'
    )
    refused = runner.invoke(
        app, ["playbooks", "compile", "--dir", str(tmp_path / "playbooks"), "--applied"], env=env
    )
    assert refused.exit_code == 1
    assert f"file.md:3: agent: agent {name!r} may call github.create_issue, which write" in refused.output
    step.write_text(step.read_text().replace(f"agent: {name}", f"agent: {name}\napproval: required"))
    passed = runner.invoke(
        app, ["playbooks", "compile", "--dir", str(tmp_path / "playbooks"), "--applied"], env=env
    )
    assert passed.exit_code == 0, passed.output
    assert "1 playbook compiled, 0 error(s), 0 warning(s)" in passed.output
    step.write_text(step.read_text().replace(f"agent: {name}", "agent: nobody-applied"))
    unknown = runner.invoke(
        app, ["playbooks", "compile", "--dir", str(tmp_path / "playbooks"), "--applied"], env=env
    )
    assert unknown.exit_code == 1 and "unknown agent 'nobody-applied'" in unknown.output
