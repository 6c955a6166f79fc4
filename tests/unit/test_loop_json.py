"""The thu-nmrc toolkit's `openloop.json` read as a loop, converted to YAML, and its command
habits (`openloop init|run|doctor|status WORKSPACE`) answered. The fixture reproduces the
README's example (tests/fixtures/seeds/thu-nmrc/ORIGIN.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config.loop import parse_loop
from config.loop_convert import convert_json_loop
from config.loop_json import load_json_loop, parse_json_loop
from config.problems import AgentConfigError
from surfaces.cli.main import app
from workflows.loop_template import render_command
from workflows.loop_types import Baseline, Step

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seeds" / "thu-nmrc" / "openloop.json"


def workspace(tmp_path: Path, text: str | None = None) -> Path:
    """The seed's layout: `.openloop/demo/openloop.json` with project_root `.` (that folder)."""
    folder = tmp_path / ".openloop" / "demo"
    folder.mkdir(parents=True)
    (folder / "openloop.json").write_text(text if text is not None else SEED.read_text())
    return folder / "openloop.json"


def edited(**changes: object) -> str:
    data = json.loads(SEED.read_text())
    for key, value in changes.items():
        where, _, inner = key.partition("__")
        if inner:
            data[where][inner] = value
        else:
            data[where] = value
    return json.dumps(data, indent=2)


def line_of(text: str, needle: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if needle in line)


def test_every_key_of_the_readme_example_means_the_same_here(tmp_path: Path) -> None:
    spec, warnings = load_json_loop(workspace(tmp_path))
    assert warnings == []
    assert spec.name == "demo"  # the workspace folder's name
    assert spec.mission.objective == "Keep the project playable, verified, and above baseline."
    assert spec.repo.path == str(tmp_path / ".openloop" / "demo")  # "." from the file's folder
    assert spec.commands[Step.PLAY] == "python app.py"
    assert (
        spec.commands[Step.SCAN]
        == spec.commands[Step.VERIFY]
        == "python -m unittest discover -s . -p 'test_*.py'"
    )
    assert "--task 'Fix the latest failure in {workspace}'" in spec.commands[Step.FIX]
    assert spec.commands[Step.IMPROVE].endswith("--task 'Improve until baseline passes'")
    assert spec.commands[Step.BASELINE] == "python benchmark.py"
    assert spec.baseline == Baseline(
        command="python benchmark.py",
        metric_name="score",
        regex=r"score=([0-9]+(?:\.[0-9]+)?)",
        value=0.9,
        direction="greater_equal",
    )
    limits = spec.limits
    assert (limits.total_rounds, limits.command_timeout_s, limits.stall_timeout_s) == (3, 900, 300)
    assert limits.max_consecutive_failures == 3


def test_a_key_with_no_meaning_here_is_a_warning_naming_it_not_a_refusal() -> None:
    text = edited(owner="qa", limits__max_memory_mb=512, commands__test="make test")
    spec, warnings = parse_json_loop(text, "openloop.json", ".", "demo")
    assert spec.commands[Step.VERIFY]  # it still reads
    assert [(w.field, w.line) for w in warnings] == [
        ("commands.test", line_of(text, '"test"')),
        ("limits.max_memory_mb", line_of(text, '"max_memory_mb"')),
        ("owner", line_of(text, '"owner"')),
    ]
    assert all("has no meaning here; not carried" in w.message for w in warnings)


def test_a_disabled_baseline_is_not_run() -> None:
    spec, warnings = parse_json_loop(edited(baseline__enabled=False), "openloop.json", ".", "demo")
    assert spec.baseline is None and Step.BASELINE not in spec.commands and warnings == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (edited(version=2), "openloop.json:2: version: 2 is not a version this reader knows; write 1"),
        (
            edited(limits__command_timeout_seconds=0),
            "openloop.json:22: limits.command_timeout_seconds: 0 must be longer than zero",
        ),
        (
            edited(commands={"fix": "x"}),
            'openloop.json:6: commands.verify: required key is missing; add "verify"',
        ),
        (edited(total_rounds="three"), "openloop.json:4: total_rounds: "),
        ('{"version": 1,\n  "mission": "x",}', "openloop.json:2: not valid JSON: "),
    ],
)
def test_a_problem_names_the_json_key_and_line(text: str, problem: str) -> None:
    with pytest.raises(AgentConfigError) as raised:
        parse_json_loop(text, "openloop.json", ".", "demo")
    assert str(raised.value).startswith(problem), str(raised.value)


def test_last_error_inside_quotes_is_refused_with_what_to_write_instead() -> None:
    text = edited(commands__fix="agent --task 'Fix this: {last_error}'")
    with pytest.raises(AgentConfigError) as raised:
        parse_json_loop(text, "openloop.json", ".", "demo")
    said = str(raised.value)
    assert said.startswith("openloop.json:9: commands.fix: {last_error} stands inside quotes")
    assert "which the project under repair writes" in said
    assert "`--task 'Fix the latest failure:' {last_error}`" in said


def test_trusted_values_are_filled_in_inside_quotes_and_stay_literal(tmp_path: Path) -> None:
    plain = {"workspace": "/work/loop-1", "project_root": "/work/loop-1", "round": "2", "last_error": "x"}
    fix = "agent --workspace {project_root} --task 'Fix the latest failure in {workspace}' -r \"{round}\""
    assert render_command(fix, plain) == (
        "agent --workspace /work/loop-1 --task 'Fix the latest failure in /work/loop-1' -r \"2\""
    )
    # A path the shell would read otherwise goes through its variable, expanded once.
    odd = str(tmp_path / "it's $HOME `x`")
    values = {**plain, "workspace": odd}
    command = render_command("printf '%s|' 'in {workspace}' \"at {workspace}\"", values)
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        env={"OPENLOOP_WORKSPACE": odd},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"in {odd}|at {odd}|"


def test_convert_writes_a_yaml_loop_that_reads_back_the_same(tmp_path: Path) -> None:
    source = workspace(tmp_path)
    text = convert_json_loop(source, tmp_path)
    converted = parse_loop(text, str(tmp_path / "loop.yaml"), tmp_path)
    original, _ = load_json_loop(source)
    assert converted.model_dump(exclude={"source"}) == original.model_dump(exclude={"source"})
    lines = text.splitlines()
    assert 'apiVersion: openloop.ai/v1alpha1  # from "version": 1' in lines
    assert '    path: .openloop/demo  # from "project_root" (read from this file\'s folder)' in lines
    assert '    command_timeout: 900  # from "limits.command_timeout_seconds" (seconds)' in lines
    assert any(line.startswith("    fix: ") and "{workspace} is the checkout" in line for line in lines)
    assert "  sandbox:" in lines  # what openloop.json's host commands now run in, spelled out


def test_convert_lists_what_it_could_not_carry(tmp_path: Path) -> None:
    source = workspace(tmp_path, edited(owner="qa", baseline__enabled=False))
    text = convert_json_loop(source, source.parent)
    assert text.endswith(
        "# Not carried from the JSON file:\n"
        '#   "owner": has no meaning here; not carried\n'
        '#   "baseline": not carried: "enabled": false\n'
    )
    assert parse_loop(text, "loop.yaml", source.parent).baseline is None


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_cli_doctor_and_convert_take_the_json_file(tmp_path: Path) -> None:
    source = workspace(tmp_path)
    code, said = invoke("loops", "doctor", str(source))
    assert "reads cleanly" in said and "unknown key" not in said and "!" not in said
    assert "✗ fix command: 'your-agent-cli' is not on PATH" in said  # the README's stand-in agent
    assert code == 4
    out = tmp_path / "loop.yaml"
    code, said = invoke("loops", "convert", str(source.parent), "-o", str(out))
    assert code == 0, said
    assert parse_loop(out.read_text(), str(out), tmp_path).name == "demo"
    code, said = invoke("loops", "convert", str(source), "-o", str(out))
    assert code == 1 and "already exists" in said


def test_cli_warns_about_unknown_keys_and_goes_on(tmp_path: Path) -> None:
    text = edited(owner="qa")
    source = workspace(tmp_path, text)
    code, said = invoke("loops", "doctor", str(source))
    line = line_of(text, '"owner"')
    assert f"! {source}:{line}: owner: has no meaning here" in said
    assert "✓ loop file" in said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["init", ".openloop/demo", "--project-root", "x"],
            "`openloop init` is `openloop loops init FOLDER` here",
        ),
        (
            ["run", ".openloop/demo", "--max-rounds", "1"],
            "`openloop run` is `openloop loops run .openloop/demo` here",
        ),
        (
            ["status", ".openloop/demo", "--json"],
            "`openloop status WORKSPACE` is `openloop loops status LOOP_ID`",
        ),
    ],
)
def test_the_toolkits_commands_say_which_command_does_it_here(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert said in result.output and "No such command" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_doctor_on_a_workspace_runs_the_loop_doctor(tmp_path: Path) -> None:
    source = workspace(tmp_path)
    code, said = invoke("doctor", str(source.parent))
    assert said.startswith(
        f"(`openloop doctor {source.parent}` is `openloop loops doctor {source.parent}` here)"
    )
    assert f"✓ loop file: {source} reads cleanly" in said and code == 4


def test_our_own_doctor_and_status_keep_working_without_an_argument() -> None:
    result = CliRunner().invoke(app, ["doctor", "--help"])
    assert result.exit_code == 0 and "--dir" in result.output
