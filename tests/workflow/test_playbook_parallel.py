"""A playbook run keeps at most `MAX_PARALLEL_STEPS` child tasks going: a fan-out wider than
that runs in slots, every step still runs once, and the waiting ones say why."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from config.loader import parse_agent
from tests.workflow.task_env import agent_yaml
from workers.sandbox import workflow_runner
from workflows.delegate_tool import TeammateStart
from workflows.playbook_calls import AgentLookup, PlaybookActivity, Recorded, RunRecord
from workflows.playbook_limits import MAX_PARALLEL_STEPS
from workflows.playbook_run import PlaybookRunWorkflow
from workflows.playbook_types import (
    CompiledPlaybook,
    PlaybookRunInput,
    PlaybookStep,
    StepStatus,
    Trigger,
    TriggerKind,
)
from workflows.types import WORKFLOW_NAME, BudgetUsage, TaskInput, TaskResult, TaskStatus

WIDTH = MAX_PARALLEL_STEPS * 2 + 5


@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)  # a test double for a step's agent task
class SlowTeammate:
    @workflow.run
    async def run(self, inp: TaskInput) -> TaskResult:
        await workflow.sleep(timedelta(minutes=5))
        return TaskResult(inp.task_id, TaskStatus.SUCCESS, "", "", "done", BudgetUsage(), 1)


def wide_playbook() -> CompiledPlaybook:
    entry = PlaybookStep(name="start", agent="ceiling-test", instructions="Go.")
    fanned = [
        PlaybookStep(name=f"w{i:02d}", agent="ceiling-test", instructions="Part.", after=("start",))
        for i in range(WIDTH)
    ]
    trigger = Trigger(kind=TriggerKind.EVENT, event="Go")
    return CompiledPlaybook(name="wide", trigger=trigger, steps=(entry, *fanned), content_hash="h")


async def test_a_fan_out_wider_than_the_limit_runs_in_slots(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    records: list[RunRecord] = []

    @activity.defn(name=PlaybookActivity.RECORD)
    async def record(run: RunRecord) -> Recorded:
        records.append(run)
        return Recorded()

    @activity.defn(name=PlaybookActivity.AGENT)
    async def agent(lookup: AgentLookup) -> TeammateStart:
        return TeammateStart(parse_agent(agent_yaml()), 1, [])

    inp = PlaybookRunInput(playbook=wide_playbook(), event_name="Go", run_key=uuid.uuid4().hex)
    async with Worker(
        ts_env.client,
        task_queue=task_queue,
        workflows=[PlaybookRunWorkflow, SlowTeammate],
        activities=[record, agent],
        workflow_runner=workflow_runner(),
    ):
        handle = await ts_env.client.start_workflow(
            PlaybookRunWorkflow.run, inp, id=f"playbook-wide-{inp.run_key}", task_queue=task_queue
        )
        result = await handle.result()

    assert [step.status for step in result.steps] == [StepStatus.SUCCEEDED] * (WIDTH + 1)
    going = [sum(step.status is StepStatus.RUNNING for step in run.steps) for run in records]
    assert max(going) == MAX_PARALLEL_STEPS, going
    waited = [
        step for run in records for step in run.steps if step.reason.startswith("waiting for a free slot")
    ]
    assert waited and all(step.status is StepStatus.PENDING for step in waited)
