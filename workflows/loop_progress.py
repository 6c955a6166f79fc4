"""Judging a repair loop's rounds: which tests a round fixed or broke, and when to stop.

Pure and deterministic (the loop workflow calls it). Progress is the identity of failing
tests, not their count: a round that fixes one test and breaks another is REGRESSING, and
the same failing set (and metric) round after round is NO_PROGRESS, never an endless retry.
A test is fixed only when it runs and passes: when scan or verify runs fewer tests than it
ever did, the tests that stopped failing are gone (deleted, skipped, no longer collected),
not fixed, and the round is REGRESSING however green the run looks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workflows.egress_blocked import command_blocked_lines
from workflows.loop_types import (
    Baseline,
    CommandResult,
    Limits,
    LoopStatus,
    Outcome,
    RoundVerdict,
    Step,
)

_CHECKED = (Step.PLAY, Step.SCAN, Step.VERIFY)


@dataclass(frozen=True)
class Judgement:
    verdict: RoundVerdict
    failing: list[str] | None
    fixed: list[str]
    broken: list[str]
    metric: float | None
    note: str
    gone: list[str] = field(default_factory=list)  # stopped failing because they did not run
    fewer: str = ""  # how many fewer tests ran than before, and which; "" when none fewer


@dataclass(frozen=True)
class Stop:
    status: LoopStatus
    reason: str
    next_action: str


def round_failing_tests(results: list[CommandResult]) -> list[str] | None:
    """The tests scan and verify named as failing; None when neither named any tests."""
    named = [r.failing_tests for r in results if r.step in (Step.SCAN, Step.VERIFY)]
    found = [tests for tests in named if tests is not None]
    return sorted(set().union(*found)) if found else None


def _shown(tests: list[str], limit: int = 3) -> str:
    more = f" and {len(tests) - limit} more" if len(tests) > limit else ""
    return ", ".join(tests[:limit]) + more


def _unnamed(results: list[CommandResult]) -> str:
    """Words for failed scan/verify runs whose output named no tests ("" when all did): with
    no test ids, a test the fix broke looks the same as one still failing."""
    steps = [
        r.step.value
        for r in results
        if r.step in (Step.SCAN, Step.VERIFY) and r.outcome is Outcome.FAILED and r.failing_tests is None
    ]
    if not steps:
        return ""
    return (
        f"{' and '.join(steps)} output names no tests, so a regression cannot be detected; "
        "print test ids (pytest, unittest, go test -json, jest --json, vitest --reporter=json, "
        "cargo test or a JUnit report)"
    )


def _blocked(results: list[CommandResult]) -> str:
    """What the sandbox's egress allowlist refused this round, by step and command ("" when
    nothing): a command that failed for want of a host says so where the round is read."""
    lines = [f"{r.step.value} {line}" for r in results for line in command_blocked_lines(r.command, r.egress)]
    return "; ".join(lines)


def _fewer(most: int, now: int, stopped: list[str]) -> tuple[list[str], str]:
    """The tests gone, and the words for a run of `now` tests where `most` ran before; the
    tests that stopped failing are named gone when the missing count accounts for them all."""
    missing = most - now
    gone = stopped if stopped and len(stopped) <= missing else []
    words = f"{missing} fewer test{'s' if missing > 1 else ''} ran than before ({most} → {now})"
    if gone:
        words += f": {_shown(gone)} gone"
    elif stopped:
        words += f"; {_shown(stopped)} stopped failing but may not have run"
    return gone, f"{words}; a test that no longer runs is not fixed"


@dataclass
class LoopProgress:
    """What the loop remembers between rounds; rebuilt on replay from the same results."""

    limits: Limits
    baseline: Baseline | None
    has_fixer: bool
    failing: list[str] | None = None
    metric: float | None = None
    last_failed: bool = False  # the last round's verify (or baseline) did not pass
    metric_missed: bool = False  # verify passed but the baseline metric fell short
    consecutive_failures: int = 0
    unchanged_rounds: int = 0
    history: list[RoundVerdict] = field(default_factory=list)
    most_ran: dict[str, int] = field(default_factory=dict)  # the most tests each check command ran
    unconfirmed: list[str] = field(default_factory=list)  # failed once, not yet seen passing

    def _count(self, results: list[CommandResult], now: set[str] | None) -> tuple[list[str], str]:
        """The tests gone this round and the words for it ("" when no fewer tests ran). Runs of
        the same command are compared (a scan and a verify running the same tests too)."""
        suspects = set(self.unconfirmed) | set(self.failing or [])
        worst: tuple[int, int, list[str]] | None = None  # most before, ran now, stopped failing
        for result in results:
            if result.step not in _CHECKED or result.tests_ran is None:
                continue
            most, failing = self.most_ran.get(result.command, 0), set(result.failing_tests or [])
            if result.tests_ran < most and (worst is None or most - result.tests_ran > worst[0] - worst[1]):
                worst = (most, result.tests_ran, sorted(suspects - failing))
            self.most_ran[result.command] = max(most, result.tests_ran)
            suspects |= failing
        if worst is None:
            self.unconfirmed = sorted(now or [])  # the others ran and passed: fixed
            return [], ""
        self.unconfirmed = sorted(suspects | (now or set()))
        return _fewer(*worst)

    def judge(self, results: list[CommandResult]) -> Judgement:
        """Record one finished round; its verdict and what changed since the last one."""
        failing = round_failing_tests(results)
        by_step = {r.step: r for r in results}
        metric = by_step[Step.BASELINE].metric if Step.BASELINE in by_step else None
        abnormal = [r for r in results if r.outcome.abnormal]
        checks_pass = all(r.outcome is Outcome.PASSED for r in results if r.step in _CHECKED)
        metric_ok = self.baseline is None or self.baseline.met(metric)
        before = set(self.failing) if self.failing is not None else None
        now = set(failing) if failing is not None else None
        fixed = sorted(before - now) if before is not None and now is not None else []
        broken = sorted(now - before) if before is not None and now is not None else []
        gone, fewer = self._count(results, now)
        if fewer:
            fixed = []  # none of them was seen running and passing
        if abnormal:
            verdict, note = RoundVerdict.ABNORMAL, "; ".join(f"{r.step}: {r.reason}" for r in abnormal)
        elif fewer:
            verdict, note = RoundVerdict.REGRESSING, fewer
        elif checks_pass and metric_ok:
            verdict, note = RoundVerdict.PASSED, "every check passed"
        elif broken:
            verdict, note = RoundVerdict.REGRESSING, f"broke {_shown(broken)}"
        elif fixed or self._metric_improved(metric):
            verdict = RoundVerdict.IMPROVING
            note = f"fixed {_shown(fixed)}" if fixed else f"{self.baseline.metric_name} now {metric}"  # type: ignore[union-attr]
        else:
            verdict, note = RoundVerdict.FAILED, self._failure_note(results, metric, checks_pass)
        if verdict is not RoundVerdict.PASSED and (unnamed := _unnamed(results)):
            note = f"{note}; {unnamed}"
        if blocked := _blocked(results):
            note = f"{note}; {blocked}"
        fix_ran = any(r.step in (Step.FIX, Step.IMPROVE) for r in results)
        if verdict in (RoundVerdict.PASSED, RoundVerdict.IMPROVING):
            self.consecutive_failures = 0
        elif fix_ran or not self.has_fixer:
            self.consecutive_failures += 1
        unchanged = len(self.history) > 0 and failing == self.failing and metric == self.metric
        self.unchanged_rounds = (
            self.unchanged_rounds + 1 if unchanged and verdict != RoundVerdict.PASSED else 0
        )
        self.failing, self.metric = failing, metric
        self.last_failed = verdict is not RoundVerdict.PASSED and not (checks_pass and not metric_ok)
        self.metric_missed = checks_pass and not metric_ok and not abnormal
        self.history.append(verdict)
        return Judgement(verdict, failing, fixed, broken, metric, note, gone, fewer)

    def _metric_improved(self, metric: float | None) -> bool:
        if self.baseline is None or metric is None or self.metric is None:
            return False
        if self.baseline.direction == "greater_equal":
            return metric > self.metric
        return metric < self.metric

    def _failure_note(self, results: list[CommandResult], metric: float | None, checks_pass: bool) -> str:
        if checks_pass and self.baseline is not None:
            op = ">=" if self.baseline.direction == "greater_equal" else "<="
            return f"{self.baseline.metric_name} {metric} (target {op} {self.baseline.value})"
        failed = [r.step.value for r in results if r.outcome is Outcome.FAILED and r.step in _CHECKED]
        tests = f": {_shown(self.failing or [])}" if self.failing else ""
        return f"{' and '.join(failed) or 'a check'} failed{tests}"

    def stop(self, round_: int, judgement: Judgement, loop_id: str) -> Stop | None:
        """Whether the loop ends after this round, with why and what a person does next."""
        logs = f"openloop loops logs {loop_id} --round {round_}"
        if judgement.verdict is RoundVerdict.PASSED:
            fixed = f"; fixed {_shown(judgement.fixed)}" if judgement.fixed else ""
            return Stop(
                LoopStatus.SUCCESS,
                f"every check passed in round {round_}{fixed}",
                f"review the change: openloop loops diff {loop_id}",
            )
        if self.unchanged_rounds >= self.limits.no_progress_rounds:
            what = f"the same failing tests ({_shown(self.failing)})" if self.failing else "the same results"
            fewer = f"; {judgement.fewer}" if judgement.fewer else ""
            return Stop(
                LoopStatus.NO_PROGRESS,
                f"{what} for {self.unchanged_rounds + 1} rounds in a row{fewer}",
                f"the fix is not reaching the cause: read {logs} and sharpen the mission or fix command",
            )
        if self.consecutive_failures >= self.limits.max_consecutive_failures:
            return Stop(
                LoopStatus.BLOCKED,
                f"{self.consecutive_failures} rounds in a row failed; round {round_}: {judgement.note}",
                f"read {logs}, then change the fix command or the mission and run the loop again",
            )
        if round_ >= self.limits.total_rounds:
            return Stop(
                LoopStatus.BLOCKED,
                f"used all {self.limits.total_rounds} rounds; round {round_}: {judgement.note}",
                "raise limits.total_rounds if the rounds were improving, or read the reports: "
                f"openloop loops report {loop_id}",
            )
        return None

    def needs_fix(self, results_so_far: list[CommandResult]) -> bool:
        """Fix when play or scan failed this round, or the last round's checks failed."""
        failed_now = any(r.outcome is not Outcome.PASSED for r in results_so_far)
        return failed_now or self.last_failed
