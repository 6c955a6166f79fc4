"""A task's place under its agent's task limits: wait for a slot, say so, give it back.

Only a task a surface started takes a slot (a subagent is part of its parent's task). With
neither `max_concurrent_tasks` nor `tasks_per_minute` set nothing runs here, so a task of
an agent without limits has the history it always had.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from workflows.admission_types import AdmissionCall, AdmissionLimits, EnterResult
    from workflows.task_basics import ActivityName, TaskStatus
    from workflows.types import PostReplyInput, TaskInput

from workflows.task_record import Cancellation, TaskRecord

# An outage of Temporal delays the task rather than failing it: retried for about 1.5 hours.
ADMISSION_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_interval=timedelta(minutes=1), maximum_attempts=100),
}
QUEUED_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_attempts=5),
}


def queued_text(agent: str, result: EnterResult, limits: AdmissionLimits) -> str:
    ahead = (
        f"{result.ahead} task{'s' if result.ahead != 1 else ''} ahead of it"
        if result.ahead
        else "next in line"
    )
    return (
        f"Queued: {agent} is at its task limit ({limits.describe()}; {result.running} running). "
        f"This task is {ahead} and starts by itself when a slot frees."
    )


class TaskAdmission:
    def __init__(self, inp: TaskInput, record: TaskRecord, cancellation: Cancellation) -> None:
        limits = inp.agent.spec.limits
        self.inp = inp
        self.record = record
        self.cancellation = cancellation
        self.limits = AdmissionLimits(limits.max_concurrent_tasks, limits.tasks_per_minute)
        self.needed = inp.parent is None and self.limits.any
        self.entered = False
        self.admitted = False

    def _call(self) -> AdmissionCall:
        meta = self.inp.agent.metadata
        return AdmissionCall(meta.workspace, meta.name, self.inp.task_id, self.limits)

    async def wait_for_slot(self) -> None:
        """Return once the task holds a slot; while it waits, the thread says it is queued."""
        if not self.needed:
            return
        result: EnterResult = await workflow.execute_activity(
            ActivityName.ADMISSION_ENTER, self._call(), result_type=EnterResult, **ADMISSION_OPTIONS
        )
        self.entered = True
        if result.admitted:
            return
        text = queued_text(self.inp.agent.metadata.name, result, self.limits)
        self.record.set_status(TaskStatus.QUEUED)
        self.record.record("queued", text)
        await workflow.execute_activity(
            ActivityName.TASK_STARTED,
            PostReplyInput(self.inp.task_id, self.inp.context, text, TaskStatus.QUEUED, 0),
            **QUEUED_OPTIONS,
        )
        await workflow.wait_condition(lambda: self.admitted or self.cancellation.requested)
        self.cancellation.check()
        self.record.set_status(TaskStatus.RUNNING)
        self.record.record("admitted", "a slot freed: the task starts")

    def admit(self) -> None:
        self.admitted = True

    async def leave(self) -> None:
        """Give the slot (or the place in line) back, so the next task can start."""
        if self.entered:
            self.entered = False
            await workflow.execute_activity(ActivityName.ADMISSION_LEAVE, self._call(), **ADMISSION_OPTIONS)
