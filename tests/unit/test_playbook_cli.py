"""`openloop playbooks compile|init`: the DAG shown, every problem printed, exit 1 on errors."""

from __future__ import annotations

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
