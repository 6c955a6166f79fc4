"""Repair loops end to end: the real dev server, real Postgres, a real repository cloned over
git's smart HTTP with the agent's token, and every command run in bubblewrap."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from click.testing import Result
from temporalio.client import Client
from typer.testing import CliRunner

from config.loop import load_loop_file
from surfaces.cli.main import app
from tests.integration.loop_env import PYTEST, loop_world, project_with
from workers.history import replay
from workflows.loop_types import Baseline, Limits, LoopStatus, Outcome, RoundVerdict, Step, WorkerTimeouts

FIX = "python autofix.py {last_error}"


def _git(cwd: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True)


async def _cli(*args: str, pg_url: str) -> Result:
    """The CLI in a thread: its commands run their own event loop."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"OPENLOOP_DATABASE_URL": pg_url})


async def test_a_shell_fix_repairs_the_project_in_round_two(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        loop_id, result = await world.run(world.spec({Step.FIX: FIX, Step.VERIFY: PYTEST}))
        reports = await world.reports(loop_id)
        patch = await world.diff(result)
        cloned_with_token = [authorized for method, path, authorized in world.git.requests]

    assert result.status is LoopStatus.SUCCESS, result.reason
    assert result.rounds == 2 and "round 2" in result.reason
    first, second = reports
    assert [c.step for c in first.commands] == [Step.VERIFY]  # nothing had failed yet: no fix
    assert first.failing_tests == ["tests/test_calc.py::test_mean"]
    assert first.verdict is RoundVerdict.FAILED
    assert [c.step for c in second.commands] == [Step.FIX, Step.VERIFY]
    assert second.fixed_tests == ["tests/test_calc.py::test_mean"] and second.failing_tests == []
    assert second.verdict is RoundVerdict.PASSED
    assert all(c.sandboxed and c.output_id is not None for r in reports for c in r.commands)
    assert "-    return sum(values) / (len(values) + 1)" in patch
    assert "+    return sum(values) / len(values)" in patch
    assert cloned_with_token and all(cloned_with_token)

    logs = await _cli("loops", "logs", loop_id, "--round", "1", "--step", "verify", pg_url=pg_url)
    assert logs.exit_code == 0 and "FAILED tests/test_calc.py::test_mean" in logs.output
    report = await _cli("loops", "report", loop_id, pg_url=pg_url)
    assert report.exit_code == 0 and "Round 2" in report.output and "fixed:" in report.output
    diff = await _cli("loops", "diff", loop_id, pg_url=pg_url)
    assert diff.exit_code == 0 and "+    return sum(values) / len(values)" in diff.output


async def test_a_baseline_below_target_keeps_the_loop_going(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    project = project_with(tmp_path, **{"score.txt": "1\n"})
    bump = "p = pathlib.Path('score.txt'); p.write_text(str(int(p.read_text()) + 1))"
    improve = f'python -c "import pathlib; {bump}"'
    baseline = Baseline(
        command="python -c \"print('score:', open('score.txt').read())\"",
        metric_name="score",
        regex=r"score: (\d+)",
        value=3,
    )
    async with loop_world(client, pg_url, tmp_path, project) as world:
        spec = world.spec({Step.FIX: FIX, Step.IMPROVE: improve, Step.VERIFY: PYTEST}, baseline=baseline)
        loop_id, result = await world.run(spec)
        reports = await world.reports(loop_id)

    assert result.status is LoopStatus.SUCCESS, result.reason
    assert [r.metric for r in reports] == [1, 1, 2, 3]
    # Tests pass from round 2, the metric reaches its target only in round 4.
    assert [r.verdict for r in reports] == [
        RoundVerdict.FAILED,
        RoundVerdict.IMPROVING,
        RoundVerdict.IMPROVING,
        RoundVerdict.PASSED,
    ]
    assert [c.step for c in reports[2].commands] == [Step.IMPROVE, Step.VERIFY, Step.BASELINE]


async def test_a_fix_that_breaks_another_test_is_regressing(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    # Repairs mean() but breaks add(), then gives up.
    breaker = """\
        import pathlib
        p = pathlib.Path("calc.py")
        text = p.read_text()
        if "(len(values) + 1)" in text:
            p.write_text(text.replace("(len(values) + 1)", "len(values)").replace("a + b", "a - b"))
        else:
            raise SystemExit("nothing more to try")
        """
    project = project_with(tmp_path, **{"breaker.py": breaker})
    async with loop_world(client, pg_url, tmp_path, project) as world:
        limits = Limits(max_consecutive_failures=2, no_progress_rounds=5, command_timeout_s=60)
        loop_id, result = await world.run(
            world.spec({Step.FIX: "python breaker.py", Step.VERIFY: PYTEST}, limits=limits)
        )
        reports = await world.reports(loop_id)

    second = reports[1]
    assert second.verdict is RoundVerdict.REGRESSING
    assert second.fixed_tests == ["tests/test_calc.py::test_mean"]
    assert second.broken_tests == ["tests/test_calc.py::test_add"]
    assert result.status is LoopStatus.BLOCKED
    assert "2 rounds in a row failed" in result.reason and "openloop loops logs" in result.next_action


async def test_a_fix_that_deletes_the_failing_test_is_not_a_pass(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    # "Fixes" the loop by deleting the failing test: pytest is green with one test fewer.
    deleter = """\
        import pathlib
        p = pathlib.Path("tests/test_calc.py")
        test = "def test_mean() -> None:\\n    assert mean([2, 4, 6]) == 4\\n"
        p.write_text(p.read_text().replace(test, ""))
        """
    project = project_with(tmp_path, **{"deleter.py": deleter})
    async with loop_world(client, pg_url, tmp_path, project) as world:
        limits = Limits(max_consecutive_failures=2, no_progress_rounds=5, command_timeout_s=60)
        loop_id, result = await world.run(
            world.spec({Step.FIX: "python deleter.py", Step.VERIFY: PYTEST}, limits=limits)
        )
        reports = await world.reports(loop_id)
        report = await _cli("loops", "report", loop_id, pg_url=pg_url)
        history = await client.get_workflow_handle(loop_id).fetch_history()

    [replayed] = await replay([history])  # the patched loop replays its own history
    assert replayed.ok, replayed.error
    first, second, third = reports
    assert first.failing_tests == ["tests/test_calc.py::test_mean"] and first.commands[0].tests_ran == 3
    assert second.commands[-1].outcome is Outcome.PASSED and second.commands[-1].tests_ran == 2
    assert second.verdict is RoundVerdict.REGRESSING  # green, but not a pass
    assert second.fixed_tests == [] and second.gone_tests == ["tests/test_calc.py::test_mean"]
    gone = "1 fewer test ran than before (3 → 2): tests/test_calc.py::test_mean gone"
    assert second.note.startswith(gone) and "a test that no longer runs is not fixed" in second.note
    assert third.verdict is RoundVerdict.REGRESSING  # still gone
    assert result.status is LoopStatus.BLOCKED, result.reason
    assert gone in result.reason
    assert report.exit_code == 0 and "gone:    tests/test_calc.py::test_mean" in report.output


async def test_three_failing_fixes_in_a_row_end_blocked(client: Client, pg_url: str, tmp_path: Path) -> None:
    # Each round's fix breaks a different thing, so the failing set keeps changing.
    shuffler = """\
        import pathlib, sys
        n = int(sys.argv[1])
        pathlib.Path(f"tests/test_extra_{n}.py").write_text("def test_new():\\n    assert False\\n")
        old = pathlib.Path(f"tests/test_extra_{n - 1}.py")
        if old.exists():
            old.unlink()
        """
    project = project_with(tmp_path, **{"shuffler.py": shuffler})
    async with loop_world(client, pg_url, tmp_path, project) as world:
        spec = world.spec({Step.FIX: "python shuffler.py {round}", Step.VERIFY: PYTEST})
        loop_id, result = await world.run(spec)
        reports = await world.reports(loop_id)

    assert result.status is LoopStatus.BLOCKED, result.reason
    assert len(reports) == 4  # round 1 had no fix yet; rounds 2-4 are three failing fixes
    assert result.reason.startswith("3 rounds in a row failed; round 4:")
    assert reports[-1].broken_tests == ["tests/test_extra_4.py::test_new"]


async def test_the_same_failures_round_after_round_end_no_progress(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        limits = Limits(no_progress_rounds=2, max_consecutive_failures=5, command_timeout_s=60)
        loop_id, result = await world.run(world.spec({Step.FIX: "true", Step.VERIFY: PYTEST}, limits=limits))

    assert result.status is LoopStatus.NO_PROGRESS
    assert "tests/test_calc.py::test_mean" in result.reason and "3 rounds in a row" in result.reason


async def test_a_silent_command_is_killed_as_stalled_and_the_round_is_abnormal(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        limits = Limits(stall_timeout_s=1.0, command_timeout_s=30, total_rounds=1)
        loop_id, result = await world.run(
            world.spec({Step.SCAN: "sleep 20", Step.VERIFY: PYTEST}, limits=limits)
        )
        [report] = await world.reports(loop_id)

    scan = report.commands[0]
    assert scan.outcome is Outcome.STALLED and scan.duration_s < 10
    assert report.verdict is RoundVerdict.ABNORMAL
    assert result.status is LoopStatus.BLOCKED and "used all 1 rounds" in result.reason


async def test_a_clone_slower_than_the_heartbeat_timeout_still_acquires_the_workspace(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        world.git.delay_seconds = 2.5  # a clone makes two requests: about 5 s in all
        spec = world.spec({Step.FIX: FIX, Step.VERIFY: PYTEST})
        _, result = await world.run(spec, WorkerTimeouts(heartbeat_s=3.0))

    assert result.status is LoopStatus.SUCCESS, result.reason


async def test_no_round_starts_after_the_loops_wall_clock_limit(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        limits = Limits(max_duration_s=1.0, command_timeout_s=30)
        slow_verify = f"sleep 1.5; {PYTEST}"
        loop_id, result = await world.run(
            world.spec({Step.FIX: "true", Step.VERIFY: slow_verify}, limits=limits)
        )
        reports = await world.reports(loop_id)

    assert result.status is LoopStatus.TIMED_OUT
    assert len(reports) == 1 and "past limits.max_duration (1 s), after 1 round(s)" in result.reason


async def test_the_readme_takes_the_fix_where_it_runs_loops_init(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    # As the README runs it: `loops init` in a clone of a repository writes loop.yaml and
    # demo-project/ there; the loop repairs demo-project; from the clone,
    # `loops diff ID | git -C demo-project apply` takes the fix into demo-project.
    clone = tmp_path / "clone"
    assert (await asyncio.to_thread(_git, tmp_path, "init", "-q", str(clone))).returncode == 0
    made = await asyncio.to_thread(CliRunner().invoke, app, ["loops", "init", str(clone)])
    assert made.exit_code == 0, made.output
    spec = load_loop_file(clone / "loop.yaml")
    assert spec.repo.path == str(clone / "demo-project")
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        loop_id, result = await world.run(spec)
        reports = await world.reports(loop_id)
    assert result.status is LoopStatus.SUCCESS, result.reason
    # Its setup made .venv (with no download: the worker's Python has pytest) before round 1,
    # through the registries' allowlist; the tests then ran from .venv with no network.
    assert reports[0].note.startswith("setup passed in") and "cached (" in reports[0].note, reports[0].note
    assert all(c.egress is None for r in reports for c in r.commands)
    assert reports[-1].commands[-1].command.startswith(".venv/bin/python -m pytest")

    diff = await _cli("loops", "diff", loop_id, pg_url=pg_url)
    assert diff.exit_code == 0, diff.output
    assert b"+++ b/demo-project/calc.py" in diff.stdout_bytes  # named from the clone's top
    assert b".venv" not in diff.stdout_bytes  # what setup made is no part of the fix
    applied = await asyncio.to_thread(_git, clone, "-C", "demo-project", "apply", stdin=diff.stdout_bytes)
    assert applied.returncode == 0, applied.stderr
    assert "return sum(values) / len(values)" in (clone / "demo-project" / "calc.py").read_text()
    # The same patch applies at the clone's top too.
    undone = await asyncio.to_thread(_git, clone, "apply", "-R", stdin=diff.stdout_bytes)
    assert undone.returncode == 0, undone.stderr
    assert "(len(values) + 1)" in (clone / "demo-project" / "calc.py").read_text()
