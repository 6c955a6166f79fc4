"""Loop files: what a good one becomes, what a bad one is told, and the command templates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from config.loader import AgentConfigError
from config.loop import load_loop_file, parse_loop, starter_loop_text
from config.loop_fields import parse_megabytes, parse_seconds
from workflows.loop_template import render_command, step_environment, unknown_placeholders
from workflows.loop_types import Step

FULL = """\
apiVersion: openloop.ai/v1alpha1
kind: Loop
metadata: {name: demo-tests}
spec:
  mission:
    objective: Make the test suite pass
    non_goals: [Rewriting the public API]
    definition_of_done: pytest passes
  repo: {path: ./demo-project}
  commands:
    play: python -m demo
    fix: python fix.py {last_error}
    verify: python -m pytest -q
  baseline: {command: pytest --cov, metric_name: coverage, regex: 'TOTAL.* (\\d+)%', value: 80}
  limits: {total_rounds: 4, command_timeout: 10m, stall_timeout: 90, memory: 2Gi, max_file_size: 256M, \
output: 1Mi}
  sandbox: {provider: none, network: true, env_from: [PIP_INDEX_URL], read_only: [/opt/tools]}
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(AgentConfigError) as caught:
        parse_loop(text, "loop.yaml", "/base")
    return [str(problem) for problem in caught.value.problems]


def _line(number: int, replacement: str) -> str:
    """FULL with its `number`-th line (1-based) replaced."""
    lines = FULL.splitlines()
    lines[number - 1] = replacement
    return "\n".join(lines) + "\n"


def test_a_full_loop_file_becomes_a_spec_in_seconds_and_megabytes() -> None:
    spec = parse_loop(FULL, "loops/demo.yaml", "/base")
    assert spec.name == "demo-tests" and spec.source == "loops/demo.yaml"
    assert spec.mission.non_goals == ["Rewriting the public API"]
    assert spec.repo.path == "/base/demo-project" and spec.repo.github is None
    assert spec.commands == {
        Step.PLAY: "python -m demo",
        Step.FIX: "python fix.py {last_error}",
        Step.VERIFY: "python -m pytest -q",
        Step.BASELINE: "pytest --cov",
    }
    assert spec.baseline is not None and spec.baseline.direction == "greater_equal"
    assert spec.baseline.met(80.0) and not spec.baseline.met(79.0)
    limits = spec.limits
    assert (limits.total_rounds, limits.command_timeout_s, limits.stall_timeout_s) == (4, 600.0, 90.0)
    assert (limits.memory_mb, limits.max_file_mb, limits.output_kb) == (2048, 244, 1024)
    assert limits.max_processes == 256  # defaults fill what the file leaves out
    assert spec.sandbox.provider == "none" and spec.sandbox.network
    assert spec.sandbox.env_from == ["PIP_INDEX_URL"] and spec.sandbox.read_only == ["/opt/tools"]


def test_a_github_repository_needs_no_path() -> None:
    spec = parse_loop(_line(9, "  repo: {github: acme/api, base: develop, agent: helper}"), "l.yaml")
    assert (spec.repo.github, spec.repo.base, spec.repo.agent, spec.repo.path) == (
        "acme/api",
        "develop",
        "helper",
        None,
    )


def test_the_starter_file_loads_next_to_its_demo_project(tmp_path: Path) -> None:
    (tmp_path / "demo-project").mkdir()
    (tmp_path / "loop.yaml").write_text(starter_loop_text())
    spec = load_loop_file(tmp_path / "loop.yaml")
    assert spec.repo.path == str(tmp_path / "demo-project")
    assert spec.commands == {
        Step.FIX: "python autofix.py {last_error}",
        Step.VERIFY: ".venv/bin/python -m pytest -q -p no:cacheprovider",
    }
    assert spec.sandbox.provider == "bubblewrap" and not spec.sandbox.network
    # Its setup installs the dependencies through the package registries only.
    assert spec.sandbox.setup is not None and len(spec.sandbox.setup.commands) == 2
    assert spec.sandbox.setup.network == ["pypi.org", "files.pythonhosted.org"]
    assert spec.source == str(tmp_path / "loop.yaml")


def test_a_local_repository_that_is_not_there_is_named_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").write_text(FULL)
    with pytest.raises(AgentConfigError) as caught:
        load_loop_file(tmp_path / "loop.yaml")
    assert str(caught.value) == (
        f"{tmp_path}/loop.yaml:9: spec.repo.path: no directory at {tmp_path}/demo-project "
        "(a relative path is read from the loop file's folder)"
    )


def test_a_missing_loop_file_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(AgentConfigError, match="cannot read: No such file or directory"):
        load_loop_file(tmp_path / "nope.yaml")


def test_an_agent_can_be_the_loops_fixer_within_a_budget() -> None:
    text = _line(12, "    fix: {agent: coder}").replace("limits: {", "limits: {budget: 2.5, ", 1)
    spec = parse_loop(text, "loop.yaml")
    assert spec.fixer_agent == "coder"
    assert spec.commands[Step.FIX] == "agent coder"
    assert spec.limits.budget_usd == 2.5
    with pytest.raises(AgentConfigError, match="spec.commands.fix.agent: 'Coder!' is not an agent name"):
        parse_loop(_line(12, "    fix: {agent: Coder!}"), "loop.yaml")


@pytest.mark.parametrize(
    ("line", "replacement", "problem"),
    [
        (2, "kind: Agent", "loop.yaml:2: kind: allowed values are 'Loop' (got 'Agent')"),
        (
            3,
            "metadata: {name: Demo}",
            "loop.yaml:3: metadata.name: 'Demo' must be 1-63 lowercase letters, "
            "digits or dashes, starting and ending with a letter or digit",
        ),
        (
            9,
            "  repo: {path: ., github: a/b}",
            "loop.yaml:9: spec.repo: give exactly one of `path: ./checkout` "
            "(a local git checkout) or `github: owner/name`",
        ),
        (
            9,
            "  repo: {github: not a repo}",
            "loop.yaml:9: spec.repo.github: 'not a repo' is not a repository; write owner/name",
        ),
        (
            10,
            "  comands:",
            "loop.yaml:4: spec.commands: required field is missing; add it\n"
            "loop.yaml:10: spec.comands: unknown key 'comands'; did you mean 'commands'? "
            "allowed keys here: mission, repo, commands, baseline, limits, sandbox",
        ),
        (
            11,
            "    test: python -m demo",
            "loop.yaml:11: spec.commands.test: unknown key 'test'; allowed keys "
            "here: play, scan, fix, verify, improve",
        ),
        (
            12,
            "    fix: {agent: helper, model: x}",
            "loop.yaml:12: spec.commands.fix: write fix as a shell command line, or as `{agent: NAME}` "
            "to let an agent fix it",
        ),
        (
            12,
            "    fix: python fix.py {last_eror}",
            "loop.yaml:12: spec.commands.fix: unknown placeholder "
            "{last_eror}; the placeholders are {workspace}, {project_root}, {round}, {last_error} (for a "
            "literal brace group write it with spaces, e.g. `{ x; }`)",
        ),
        (
            12,
            '    fix: python fix.py "{last_error}"',
            "loop.yaml:12: spec.commands.fix: {last_error} stands inside quotes, `${...}` or a "
            "here-document: its value is the last failed command's output, which the project under "
            "repair writes, so it could end the quotes and run as shell code; write it outside the "
            "quotes as an argument of its own, e.g. `--task 'Fix the latest failure:' {last_error}` "
            "(it is quoted for you)",
        ),
        (
            13,
            "    verify: ''",
            "loop.yaml:13: spec.commands.verify: empty command; write the shell line to "
            "run, or remove the key",
        ),
        (
            13,
            "    verify_: x",
            "loop.yaml:10: spec.commands.verify: required field is missing; add "
            "`verify: python -m pytest -q`\nloop.yaml:13: spec.commands.verify_: unknown key 'verify_'; "
            "did you mean 'verify'? allowed keys here: play, scan, fix, verify, improve",
        ),
        (
            14,
            "  baseline: {command: x, metric_name: c, regex: '(\\d+', value: 1}",
            "loop.yaml:14: spec.baseline.regex: "
            "not a valid regular expression: missing ), unterminated subpattern at position 0",
        ),
        (
            14,
            "  baseline: {command: x, metric_name: c, regex: x, value: 1, direction: up}",
            "loop.yaml:14: "
            "spec.baseline.direction: allowed values are 'greater_equal' or 'less_equal' (got 'up')",
        ),
        (
            15,
            "  limits: {command_timeout: 10 minutes}",
            "loop.yaml:15: spec.limits.command_timeout: '10 minutes' is not a duration; "
            "write a number of seconds or a number and a unit, e.g. 90s, 10m, 1h",
        ),
        (
            15,
            "  limits: {memory: 2 gigs}",
            "loop.yaml:15: spec.limits.memory: '2 gigs' is not a size; write a "
            "number of megabytes or a number and a unit, e.g. 256Mi, 2Gi, 512M",
        ),
        (
            15,
            "  limits: {stall_timeout: 0s}",
            "loop.yaml:15: spec.limits.stall_timeout: '0s' must be longer than zero",
        ),
        (
            16,
            "  sandbox: {provider: docker}",
            "loop.yaml:16: spec.sandbox.provider: 'docker' is not a sandbox provider here: write "
            "bubblewrap (each command in its own bubblewrap sandbox on the loop worker) or none "
            '(unconfined, trusted projects only); deploy/README.md "Sandbox providers" says what '
            "another provider implements",
        ),
        (
            16,
            "  sandbox: {env_from: [A-B], read_only: [opt]}",
            "loop.yaml:16: spec.sandbox.env_from[0]: 'A-B' "
            "is not an environment variable name\nloop.yaml:16: spec.sandbox.read_only[0]: 'opt' must be an "
            "absolute path",
        ),
    ],
)
def test_a_bad_field_is_named_with_its_file_line_and_fix(line: int, replacement: str, problem: str) -> None:
    assert "\n".join(_problems(_line(line, replacement))) == problem


def test_every_problem_in_a_file_is_reported_at_once() -> None:
    text = _line(3, "metadata: {name: Demo}").replace("kind: Loop", "kind: Agent")
    assert [problem.split(":")[1] for problem in _problems(text)] == ["2", "3"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "loop.yaml: expected one loop document; the file is empty"),
        (FULL + "---\n" + FULL, "loop.yaml: expected one loop document; found 2 documents"),
        (
            "- a list\n",
            "loop.yaml:1: not a loop document: expected a mapping with apiVersion, kind, metadata, "
            "spec (got list)",
        ),
        ("kind: [unclosed\n", "loop.yaml:2: not valid YAML: did not find expected ',' or ']'"),
        (
            FULL.replace("kind: Loop\n", "kind: Loop\nkind: Loop\n"),
            "loop.yaml:3: kind: duplicate key; first set on line 2",
        ),
    ],
)
def test_a_file_that_is_not_one_loop_says_so(text: str, problem: str) -> None:
    assert _problems(text) == [problem]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(90, 90.0), (1.5, 1.5), ("90s", 90.0), ("10m", 600.0), ("1h", 3600.0), ("30", 30.0)],
)
def test_durations_are_seconds(value: object, seconds: float) -> None:
    assert parse_seconds(value) == seconds


@pytest.mark.parametrize(
    ("value", "megabytes"),
    [
        (512, 512.0),
        ("512Mi", 512.0),
        ("2Gi", 2048.0),
        ("2GiB", 2048.0),
        ("1000k", 1e6 / 2**20),
        ("256M", 256e6 / 2**20),
    ],
)
def test_sizes_are_megabytes(value: object, megabytes: float) -> None:
    assert parse_megabytes(value) == pytest.approx(megabytes)


@pytest.mark.parametrize("value", [True, -1, 0, "fast", "5 parsecs", None])
def test_nonsense_durations_and_sizes_are_refused(value: object) -> None:
    for parse in (parse_seconds, parse_megabytes):
        with pytest.raises(ValueError):
            parse(value)


def test_only_bare_identifiers_in_braces_are_placeholders() -> None:
    command = "f {last_eror} ${HOME} {a,b} {} {round} $(g {nope}) awk '{print}' \"{fstring}\" # {comment"
    assert unknown_placeholders(command) == ["last_eror", "nope"]


PAYLOADS = ['"; rm -rf / #', "$(touch x)", "`touch y`", "'; touch z; '", "a\nb && touch w", ""]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_last_error_stays_one_literal_argument_in_the_shell(tmp_path: Path, payload: str) -> None:
    # Should quoting ever break, `rm` is a stand-in that only leaves a mark.
    stand_ins, work = tmp_path / "bin", tmp_path / "work"
    stand_ins.mkdir()
    work.mkdir()
    (stand_ins / "rm").write_text(f"#!/bin/sh\necho ran > {tmp_path}/rm-ran\n")
    (stand_ins / "rm").chmod(0o755)
    show_args = f"{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"
    command = f"{show_args} {{last_error}} {{round}} $(echo {{workspace}})"
    rendered = render_command(command, {"last_error": payload, "round": "3", "workspace": str(work)})
    done = subprocess.run(
        ["/bin/sh", "-c", rendered],
        cwd=work,
        env={"PATH": f"{stand_ins}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert json.loads(done.stdout) == [payload, "3", str(work)]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bin", "work"]
    assert list(work.iterdir()) == []  # nothing the payload asked for ran


@pytest.mark.parametrize(
    "command",
    ['echo "{last_error}"', "echo '{last_error}'", "echo ${X:-{last_error}}", "cat <<EOF\n{last_error}\nEOF"],
)
def test_a_placeholder_inside_quotes_is_never_filled(command: str) -> None:
    with pytest.raises(ValueError, match="inside quotes"):
        render_command(command, {"last_error": "$(touch x)"})


def test_rendering_needs_a_value_for_every_placeholder_used() -> None:
    assert render_command("echo {round} {other}", {"round": "1"}) == "echo 1 {other}"
    with pytest.raises(ValueError, match=r"no value for \{workspace\}"):
        render_command("ls {workspace}", {})


def test_every_step_sees_where_and_when_it_runs() -> None:
    assert step_environment("/w", "/w/app", 2, Step.FIX) == {
        "OPENLOOP_WORKSPACE": "/w",
        "OPENLOOP_PROJECT_ROOT": "/w/app",
        "OPENLOOP_ROUND": "2",
        "OPENLOOP_STEP": "fix",
    }


def test_loops_init_with_an_agent_writes_a_loop_that_agent_fixes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from surfaces.cli.main import app

    done = CliRunner().invoke(app, ["loops", "init", str(tmp_path), "--agent", "coder"])
    assert done.exit_code == 0, done.output
    spec = load_loop_file(tmp_path / "loop.yaml")
    assert spec.fixer_agent == "coder" and spec.commands[Step.FIX] == "agent coder"
    assert (tmp_path / "demo-project" / "calc.py").is_file()
