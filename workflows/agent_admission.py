"""AgentAdmissionWorkflow: one long-lived workflow per agent keeping its task limits.

Tasks of an agent with `limits.max_concurrent_tasks` or `limits.tasks_per_minute` enter
here (an update, so concurrent tasks from any worker are answered one at a time) before they
start work, and leave when they end. A task that finds no room waits in line and is sent the
`admitted` signal when its turn comes: when a task leaves, or when the rate window moves.

A task that ended without leaving (terminated by an operator) would hold its slot forever;
while someone waits for a full agent, the workflow asks every few minutes which holders still
run and frees the others. History stays small: it continues-as-new after
`max_updates_per_run` updates or when Temporal suggests it, carrying its state.

Deterministic: no I/O, no clock but workflow.now().
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import LOCAL_OPTIONS
    from workflows.admission_queue import AdmissionQueue
    from workflows.admission_types import (
        ADMISSION_WORKFLOW_NAME,
        ADMITTED_SIGNAL,
        AdmissionInput,
        AdmissionSnapshot,
        AdmissionState,
        EnterRequest,
        EnterResult,
        LeaveRequest,
    )
    from workflows.task_basics import ActivityName

STALE_CHECK = timedelta(minutes=5)  # how often waiting tasks have holders checked


@workflow.defn(name=ADMISSION_WORKFLOW_NAME)
class AgentAdmissionWorkflow:
    @workflow.init
    def __init__(self, inp: AdmissionInput) -> None:
        self.inp = inp
        self.queue = AdmissionQueue(inp.state or AdmissionState())
        self.updates_this_run = 0
        self.changed = False

    @workflow.run
    async def run(self, inp: AdmissionInput) -> None:
        while True:
            await self._admit_waiting()
            self.changed = False
            now = workflow.now()
            wake = self.queue.next_wake(now)
            timeout = (wake - now) if wake is not None else None
            if self.queue.state.waiting and wake is None:
                timeout = STALE_CHECK  # full by concurrency: look for holders that are gone
            try:
                await workflow.wait_condition(
                    lambda: self.changed or self._should_continue_as_new(),
                    timeout=max(timeout, timedelta(seconds=1)) if timeout is not None else None,
                )
            except TimeoutError:
                if wake is None and self.queue.state.waiting:
                    await self._free_stale_holders()
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                await self._admit_waiting()
                self.queue.state.runs += 1
                workflow.continue_as_new(
                    AdmissionInput(
                        workspace=inp.workspace,
                        agent=inp.agent,
                        max_updates_per_run=inp.max_updates_per_run,
                        state=self.queue.state,
                    )
                )

    @workflow.update
    def enter(self, req: EnterRequest) -> EnterResult:
        self.updates_this_run += 1
        self.changed = True
        return self.queue.enter(req.task_id, req.limits, workflow.now())

    @enter.validator
    def _validate_enter(self, req: EnterRequest) -> None:
        if not req.task_id:
            raise ValueError("entering needs a task id")

    @workflow.update
    def leave(self, req: LeaveRequest) -> None:
        self.updates_this_run += 1
        self.changed = self.queue.leave(req.task_id) or self.changed

    @workflow.query
    def snapshot(self) -> AdmissionSnapshot:
        return self.queue.snapshot()

    async def _admit_waiting(self) -> None:
        for task_id in self.queue.admit_next(workflow.now()):
            try:
                await workflow.get_external_workflow_handle(task_id).signal(ADMITTED_SIGNAL)
            except Exception:  # the task is gone: its slot goes to the next in line
                workflow.logger.info("admitted task %s no longer runs; freeing its slot", task_id)
                self.queue.leave(task_id)
                self.changed = True

    async def _free_stale_holders(self) -> None:
        running = list(self.queue.state.running)
        alive: list[str] = await workflow.execute_local_activity(
            ActivityName.ADMISSION_STILL_RUNNING, running, result_type=list[str], **LOCAL_OPTIONS
        )
        for task_id in running:
            if task_id not in alive:
                workflow.logger.info("task %s ended without leaving; freeing its slot", task_id)
                self.queue.leave(task_id)

    def _should_continue_as_new(self) -> bool:
        return (
            self.updates_this_run >= self.inp.max_updates_per_run
            or workflow.info().is_continue_as_new_suggested()
        )
