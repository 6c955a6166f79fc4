"""The admission line's arithmetic: slots, the rate window, order, and repeated calls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workflows.admission_queue import AdmissionQueue
from workflows.admission_types import AdmissionLimits, AdmissionState

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
TWO_AT_ONCE = AdmissionLimits(max_concurrent_tasks=2)
ONE_A_MINUTE = AdmissionLimits(tasks_per_minute=1)


def test_slots_fill_then_tasks_wait_in_order_and_move_up_as_others_leave() -> None:
    line = AdmissionQueue(AdmissionState())
    assert [line.enter(t, TWO_AT_ONCE, T0).admitted for t in "abcd"] == [True, True, False, False]
    assert line.enter("d", TWO_AT_ONCE, T0).ahead == 1  # asking again answers the same
    assert line.admit_next(T0) == []
    assert line.leave("a") and line.admit_next(T0) == ["c"]
    assert not line.leave("a")  # leaving twice changes nothing
    assert line.snapshot().running == ["b", "c"] and line.snapshot().waiting == ["d"]


def test_a_newcomer_never_jumps_the_line_even_when_a_slot_is_free() -> None:
    line = AdmissionQueue(AdmissionState())
    for task in "abc":
        line.enter(task, TWO_AT_ONCE, T0)
    line.leave("a")
    assert not line.enter("e", TWO_AT_ONCE, T0).admitted  # c waits before e
    assert line.admit_next(T0) == ["c"]


def test_the_rate_window_admits_one_a_minute_and_says_when() -> None:
    line = AdmissionQueue(AdmissionState())
    assert line.enter("a", ONE_A_MINUTE, T0).admitted
    assert not line.enter("b", ONE_A_MINUTE, T0 + timedelta(seconds=5)).admitted
    assert line.next_wake(T0 + timedelta(seconds=5)) == T0 + timedelta(minutes=1)
    assert line.admit_next(T0 + timedelta(seconds=59)) == []
    assert line.admit_next(T0 + timedelta(seconds=60)) == ["b"]
    assert line.next_wake(T0 + timedelta(seconds=60)) is None  # no one waits


def test_both_limits_hold_together_and_the_latest_limits_apply() -> None:
    both = AdmissionLimits(max_concurrent_tasks=1, tasks_per_minute=10)
    line = AdmissionQueue(AdmissionState())
    assert line.enter("a", both, T0).admitted
    assert not line.enter("b", both, T0).admitted
    assert line.next_wake(T0) is None  # full by concurrency: only a leave frees it
    raised = AdmissionLimits(max_concurrent_tasks=2, tasks_per_minute=10)
    assert not line.enter("c", raised, T0).admitted  # b is still first in line
    assert line.admit_next(T0) == ["b"]
