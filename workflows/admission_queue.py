"""The arithmetic of an agent's admission line: who holds a slot, who waits, who goes next.

A task is admitted when no one waits before it, fewer than `max_concurrent_tasks` tasks hold
a slot, and fewer than `tasks_per_minute` were admitted in the last minute. Otherwise it
waits in line, first come first served; nothing is ever dropped. Entering twice (a retried
activity) answers the same; leaving twice changes nothing. Pure: time comes in as `now`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from workflows.admission_types import (
    RATE_WINDOW_SECONDS,
    AdmissionLimits,
    AdmissionSnapshot,
    AdmissionState,
    EnterResult,
)

WINDOW = timedelta(seconds=RATE_WINDOW_SECONDS)


class AdmissionQueue:
    def __init__(self, state: AdmissionState) -> None:
        self.state = state

    def enter(self, task_id: str, limits: AdmissionLimits, now: datetime) -> EnterResult:
        """Admit the task now, or put it in line; the latest limits apply to everyone."""
        state = self.state
        state.limits = limits
        if task_id in state.running:
            return EnterResult(admitted=True, running=len(state.running))
        if task_id not in state.waiting:
            if not state.waiting and self._has_room(now):
                self._admit(task_id, now)
                return EnterResult(admitted=True, running=len(state.running))
            state.waiting.append(task_id)
        return EnterResult(admitted=False, ahead=state.waiting.index(task_id), running=len(state.running))

    def leave(self, task_id: str) -> bool:
        """Free the task's slot or its place in line; True when something changed."""
        state = self.state
        if task_id in state.running:
            state.running.remove(task_id)
            return True
        if task_id in state.waiting:
            state.waiting.remove(task_id)
            return True
        return False

    def admit_next(self, now: datetime) -> list[str]:
        """Move waiting tasks into free slots, in order; the ones admitted must be told."""
        admitted = []
        while self.state.waiting and self._has_room(now):
            task_id = self.state.waiting.pop(0)
            self._admit(task_id, now)
            admitted.append(task_id)
        return admitted

    def next_wake(self, now: datetime) -> datetime | None:
        """When the rate window lets the first waiting task in, if only the rate holds it."""
        limits = self.state.limits
        if not self.state.waiting or limits.tasks_per_minute is None:
            return None
        if not self._concurrency_room():
            return None  # someone must leave first; leaving wakes the workflow
        recent = self._recent(now)
        if len(recent) < limits.tasks_per_minute:
            return now
        return recent[len(recent) - limits.tasks_per_minute] + WINDOW

    def snapshot(self) -> AdmissionSnapshot:
        return AdmissionSnapshot(list(self.state.running), list(self.state.waiting), self.state.limits)

    def _has_room(self, now: datetime) -> bool:
        limits = self.state.limits
        if not self._concurrency_room():
            return False
        return limits.tasks_per_minute is None or len(self._recent(now)) < limits.tasks_per_minute

    def _concurrency_room(self) -> bool:
        limit = self.state.limits.max_concurrent_tasks
        return limit is None or len(self.state.running) < limit

    def _recent(self, now: datetime) -> list[datetime]:
        times = [datetime.fromisoformat(t) for t in self.state.admitted_at]
        recent = sorted(t for t in times if now - t < WINDOW)
        self.state.admitted_at = [t.isoformat() for t in recent]
        return recent

    def _admit(self, task_id: str, now: datetime) -> None:
        self.state.running.append(task_id)
        if self.state.limits.tasks_per_minute is not None:
            self.state.admitted_at.append(now.isoformat())
