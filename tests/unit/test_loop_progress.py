"""How a loop judges its rounds: failing-test identity, regressions, the circuit breaker."""

from __future__ import annotations

from workflows.loop_progress import LoopProgress
from workflows.loop_types import Baseline, CommandResult, Limits, LoopStatus, Outcome, RoundVerdict, Step


def ran(
    step: Step,
    outcome: Outcome = Outcome.PASSED,
    tests: list[str] | None = None,
    metric: float | None = None,
    count: int | None = None,
) -> CommandResult:
    return CommandResult(
        step=step, round=1, command=step.value, outcome=outcome, exit_code=0, duration_s=1.0,
        output_bytes=0, output_id=None, tail="", failing_tests=tests, metric=metric, tests_ran=count,
    )  # fmt: skip


def verify(*failing: str, count: int | None = None) -> CommandResult:
    return ran(Step.VERIFY, Outcome.FAILED if failing else Outcome.PASSED, list(failing), count=count)


def progress(**limits: int) -> LoopProgress:
    return LoopProgress(Limits(**limits), baseline=None, has_fixer=True)


def test_a_round_that_fixes_one_test_and_breaks_another_is_regressing() -> None:
    loop = progress()
    loop.judge([verify("a", "b")])
    judged = loop.judge([ran(Step.FIX), verify("b", "c")])
    assert judged.verdict is RoundVerdict.REGRESSING
    assert judged.fixed == ["a"] and judged.broken == ["c"]


def test_fewer_failures_and_none_new_is_improving_and_resets_the_breaker() -> None:
    loop = progress()
    loop.judge([verify("a", "b")])
    loop.judge([ran(Step.FIX), verify("a", "b")])
    assert loop.consecutive_failures == 1
    judged = loop.judge([ran(Step.FIX), verify("b")])
    assert judged.verdict is RoundVerdict.IMPROVING and loop.consecutive_failures == 0


def test_a_round_without_a_fix_attempt_does_not_count_against_the_fixer() -> None:
    loop = progress(max_consecutive_failures=1)
    judged = loop.judge([verify("a")])
    assert judged.verdict is RoundVerdict.FAILED
    assert loop.stop(1, judged, "L") is None
    assert loop.needs_fix([])


def test_an_abnormal_command_makes_the_round_abnormal_even_if_verify_passed() -> None:
    loop = progress()
    judged = loop.judge([ran(Step.SCAN, Outcome.STALLED), verify()])
    assert judged.verdict is RoundVerdict.ABNORMAL


def test_success_needs_the_baseline_too() -> None:
    loop = LoopProgress(
        Limits(), Baseline(command="c", metric_name="cov", regex="(\\d+)", value=80), has_fixer=True
    )
    first = loop.judge([verify(), ran(Step.BASELINE, metric=70)])
    assert first.verdict is RoundVerdict.FAILED and "cov 70.0 (target >= 80.0)" in first.note
    assert loop.metric_missed and not loop.needs_fix([])
    second = loop.judge([ran(Step.IMPROVE), verify(), ran(Step.BASELINE, metric=85)])
    assert second.verdict is RoundVerdict.PASSED
    stop = loop.stop(2, second, "L")
    assert stop is not None and stop.status is LoopStatus.SUCCESS


def test_the_same_failures_stop_with_no_progress_before_the_rounds_run_out() -> None:
    loop = progress(no_progress_rounds=2, max_consecutive_failures=9, total_rounds=9)
    stops = []
    for round_ in range(1, 4):
        judged = loop.judge([ran(Step.FIX), verify("a")])
        stops.append(loop.stop(round_, judged, "L"))
    assert stops[:2] == [None, None]
    assert stops[2] is not None and stops[2].status is LoopStatus.NO_PROGRESS
    assert "openloop loops logs L --round 3" in stops[2].next_action


def test_failing_tests_that_stop_running_are_gone_not_fixed_and_the_loop_does_not_succeed() -> None:
    loop = LoopProgress(Limits(max_consecutive_failures=2), baseline=None, has_fixer=True)
    loop.judge([verify("t::a", "t::b", count=6)])  # 2 failed, 4 passed
    judged = loop.judge([ran(Step.FIX), verify(count=4)])  # the fixer deleted both: 4 passed
    assert judged.verdict is RoundVerdict.REGRESSING
    assert judged.gone == ["t::a", "t::b"] and judged.fixed == []
    assert judged.note.startswith("2 fewer tests ran than before (6 → 4): t::a, t::b gone")
    assert loop.stop(2, judged, "L") is None and loop.needs_fix([])
    again = loop.judge([ran(Step.FIX), verify(count=4)])  # still gone: still not a pass
    assert again.verdict is RoundVerdict.REGRESSING and again.gone == ["t::a", "t::b"]
    stop = loop.stop(3, again, "L")
    assert stop is not None and stop.status is LoopStatus.BLOCKED and "t::a, t::b gone" in stop.reason
    restored = loop.judge([ran(Step.FIX), verify(count=6)])  # put back and really fixed
    assert restored.verdict is RoundVerdict.PASSED and restored.gone == []


def test_a_test_fixed_while_another_is_deleted_is_not_called_fixed() -> None:
    loop = LoopProgress(Limits(), baseline=None, has_fixer=True)
    loop.judge([verify("t::a", "t::b", count=6)])
    judged = loop.judge([ran(Step.FIX), verify(count=5)])
    assert judged.verdict is RoundVerdict.REGRESSING and judged.gone == [] and judged.fixed == []
    assert "1 fewer test ran than before (6 → 5); t::a, t::b stopped failing" in judged.note


def test_more_tests_judge_as_before() -> None:
    loop = LoopProgress(Limits(), baseline=None, has_fixer=True)
    loop.judge([verify("t::a", count=6)])
    judged = loop.judge([ran(Step.FIX), verify(count=7)])  # a test added, the failing one fixed
    assert judged.verdict is RoundVerdict.PASSED and judged.fixed == ["t::a"]


def test_a_failed_run_that_names_no_tests_is_said_in_the_round_report() -> None:
    loop = progress()
    judged = loop.judge([ran(Step.VERIFY, Outcome.FAILED, tests=None)])
    assert judged.verdict is RoundVerdict.FAILED
    assert judged.note == (
        "verify failed; verify output names no tests, so a regression cannot be detected; print test "
        "ids (pytest, unittest, go test -json, jest --json, vitest --reporter=json, cargo test or a "
        "JUnit report)"
    )
    named = progress().judge([ran(Step.VERIFY, Outcome.FAILED, tests=["t::a"])])
    assert "names no tests" not in named.note
    passed = progress().judge([ran(Step.VERIFY, Outcome.PASSED, tests=None)])
    assert passed.note == "every check passed"
