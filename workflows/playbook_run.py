"""A playbook run: one compiled playbook for one event, each step a child agent task.

Every step waits for the steps it comes `after`, then runs (`workflows.playbook_step`): steps
whose upstream steps are done run in parallel, at most `MAX_PARALLEL_STEPS` child tasks at once
(the others wait for a free slot). A step whose upstream step failed or was
skipped is SKIPPED with that reason; the run FAILS when any step failed, with the first
failure's reason. After a step with `emits:` succeeds (and its `when:` condition, if any,
holds for its output), its output is published as that event, with the fields it `carried`
over from the run's event, which starts the runs of the playbooks listening for it (one
level deeper; chains stop at `MAX_EMIT_DEPTH`, and the runs of one outside event at
`MAX_RUNS_PER_EVENT`, the reason in the emitting step's). The run's record (steps, outputs,
costs) is stored when it starts, after each step, and at its end; `progress` shows the steps
while it runs.

The workflow id derives from the event (a delivery id, a Slack event id, a schedule's time),
so a redelivered event never starts a second run. Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import search
    from workflows.activity_options import STORE_OPTIONS
    from workflows.playbook_calls import (
        CRON_EVENT,
        MAX_EMIT_DEPTH,
        SCHEDULED_RUN_KEY,
        PlaybookActivity,
        Published,
        PublishEvent,
        Recorded,
        RunRecord,
    )
    from workflows.playbook_limits import MAX_PARALLEL_STEPS
    from workflows.playbook_types import (
        PLAYBOOK_WORKFLOW_NAME,
        PlaybookRunInput,
        PlaybookRunResult,
        PlaybookRunStatus,
        PlaybookStep,
        StepRun,
        StepStatus,
    )

from workflows.playbook_step import StepRunner, why

_STORE = STORE_OPTIONS
_DONE = (StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED)
# Set by Temporal on every run a Schedule starts: the time it was due.
SCHEDULED_START = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")


def run_key_of(inp: PlaybookRunInput) -> str:
    """What the run is unique for; a scheduled run's is the time its schedule fired."""
    if inp.run_key != SCHEDULED_RUN_KEY:
        return inp.run_key
    due = workflow.info().typed_search_attributes.get(SCHEDULED_START)
    return due.isoformat() if due is not None else workflow.info().workflow_id


@workflow.defn(name=PLAYBOOK_WORKFLOW_NAME)
class PlaybookRunWorkflow:
    def __init__(self) -> None:
        self._steps: list[StepRun] = []
        self._record: RunRecord | None = None
        self._saves = 0
        self._running = 0  # steps whose child tasks are going

    @workflow.query(name="progress")
    def progress(self) -> list[StepRun]:
        return self._steps

    def _state(self, name: str) -> StepRun:
        return next(state for state in self._steps if state.name == name)

    @workflow.run
    async def run(self, inp: PlaybookRunInput) -> PlaybookRunResult:
        run_id = workflow.info().workflow_id
        playbook = inp.playbook
        workflow.upsert_search_attributes([search.PLAYBOOK.value_set(playbook.name)])
        self._steps = [StepRun(name=step.name) for step in playbook.steps]
        run_key = run_key_of(inp)
        cron = inp.event_name == CRON_EVENT
        event = {"scheduled_at": run_key, **inp.event} if cron else inp.event
        self._record = RunRecord(
            run_id=run_id, playbook=playbook.name, version=playbook.version, event_name=inp.event_name,
            run_key=run_key, event=event, depth=inp.depth,
        )  # fmt: skip
        recorded = await self._save()
        if cron and recorded.last_run is not None and "last_run" not in event:
            event = {**event, "last_run": recorded.last_run}
            self._record = self._record.model_copy(update={"event": event})
        runner = StepRunner(inp.model_copy(update={"event": event}), run_id)
        try:
            await asyncio.gather(*(self._step(inp, runner, step) for step in playbook.steps))
        except asyncio.CancelledError:
            for state in self._steps:
                if state.status not in _DONE:
                    state.status, state.reason = StepStatus.FAILED, "the run was cancelled"
        failed = [state for state in self._steps if state.status is StepStatus.FAILED]
        status = PlaybookRunStatus.FAILED if failed else PlaybookRunStatus.SUCCEEDED
        reason = (
            f"step {failed[0].name} failed: {failed[0].reason}"
            if failed
            else f"{len(self._steps)} step(s) succeeded"
        )
        cost = round(sum(state.cost_usd for state in self._steps), 6)
        await self._save(status=status, reason=reason, cost_usd=cost)
        return PlaybookRunResult(
            playbook=playbook.name, version=playbook.version, status=status, steps=self._steps,
            cost_usd=cost, reason=reason,
        )  # fmt: skip

    async def _step(self, inp: PlaybookRunInput, runner: StepRunner, step: PlaybookStep) -> None:
        state = self._state(step.name)
        await workflow.wait_condition(lambda: all(self._state(up).status in _DONE for up in step.after))
        blocked = [up for up in step.after if self._state(up).status is not StepStatus.SUCCEEDED]
        if blocked:
            upstream = self._state(blocked[0])
            state.status = StepStatus.SKIPPED
            state.reason = f"upstream step {upstream.name} {upstream.status.value.lower()}"
            return
        if self._running >= MAX_PARALLEL_STEPS:  # a ready step waits for a free slot
            state.reason = f"waiting for a free slot: a run has at most {MAX_PARALLEL_STEPS} steps going"
            while self._running >= MAX_PARALLEL_STEPS:  # every waiter wakes; the first takes the slot
                await workflow.wait_condition(lambda: self._running < MAX_PARALLEL_STEPS)
            state.reason = ""
        self._running += 1
        state.status = StepStatus.RUNNING
        await self._save()
        outputs = {done.name: done.output for done in self._steps if done.status is StepStatus.SUCCEEDED}
        try:
            await runner.run(step, state, outputs)
        finally:
            self._running -= 1
        if state.status is StepStatus.SUCCEEDED and step.emits:
            if step.emit_when is None or step.emit_when.holds(state.output):
                await self._publish(inp, step, state)
            else:
                state.reason = f"did not emit {step.emits}: {step.emit_when} does not hold"
        await self._save()

    async def _publish(self, inp: PlaybookRunInput, step: PlaybookStep, state: StepRun) -> None:
        assert step.emits is not None
        run_id = workflow.info().workflow_id
        if inp.depth + 1 > MAX_EMIT_DEPTH:
            state.reason = (
                f"did not emit {step.emits}: runs started by emitted events stop at depth {MAX_EMIT_DEPTH}"
            )
            return
        carried = {name: inp.event[name] for name in step.carried if name in inp.event}
        event = PublishEvent(
            event_name=step.emits, event={**carried, **state.output}, run_key=f"{run_id}.{step.name}",
            depth=inp.depth + 1, source=run_id, origin=inp.origin or run_id,
        )  # fmt: skip
        try:
            published: Published = await workflow.execute_activity(
                PlaybookActivity.PUBLISH, event, result_type=Published, summary=f"emit {step.emits}", **_STORE
            )
        except ActivityError as err:
            state.status, state.reason = StepStatus.FAILED, f"could not emit {step.emits}: {why(err)}"
            return
        started = published.started + published.duplicates
        said = [text for text in (", ".join(started), published.refused) if text]
        state.reason = f"emitted {step.emits}: " + ("; ".join(said) or "no playbook listens")

    async def _save(self, **changes: Any) -> Recorded:
        """Store the run as it is now; `seq` keeps an older write from landing after a newer one."""
        assert self._record is not None
        self._saves += 1
        self._record = self._record.model_copy(
            update={"steps": [state.model_copy() for state in self._steps], "seq": self._saves, **changes}
        )
        recorded: Recorded = await workflow.execute_activity(
            PlaybookActivity.RECORD,
            self._record,
            result_type=Recorded,
            summary=f"record {self._record.status.value}",
            **_STORE,
        )
        return recorded
