"""An agent's task limits: tasks over `max_concurrent_tasks` or `tasks_per_minute` wait in
line, say so on their surface, start by themselves in order, and none is dropped; a task
cancelled while it waits leaves the line. Real task and admission workflows, real admission
activities, scripted model, on the time-skipping server."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.admission_activities import ADMISSION_ACTIVITIES
from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import AGENT_YAML, ARGS, pending_request, start, task_input
from workers.sandbox import workflow_runner
from workflows.admission_types import admission_workflow_id
from workflows.agent_admission import AgentAdmissionWorkflow
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import (
    ActivityName,
    ApprovalDecision,
    CancelRequest,
    ModelCallInput,
    ModelCallResult,
    PostReplyInput,
    TaskStatus,
)


def limited(limits: str, name: str) -> str:
    """The approver agent with task limits, named for the test: each test has its own line."""
    with_limits = AGENT_YAML.replace("  approvals:", f"  limits: {limits}\n  approvals:")
    return with_limits.replace("name: approver-test", f"name: {name}")


def per_task_script() -> Script:
    """Each task asks to open the issue (approval needed), then answers."""
    calls: Counter[str] = Counter()

    def answer(inp: ModelCallInput) -> ModelCallResult:
        calls[inp.task_id] += 1
        if calls[inp.task_id] == 1:
            return use("github.create_issue", json.dumps(ARGS))
        return say(f"Opened the issue for {inp.task_id}.")

    return Script([], default=answer)


def admission_worker(
    env: WorkflowEnvironment, script: Script, task_queue: str, said: list[PostReplyInput]
) -> Worker:
    @activity.defn(name=ActivityName.TASK_STARTED)
    async def task_started(inp: PostReplyInput) -> None:
        said.append(inp)

    others = [a for a in script.activities() if a.__name__ != "task_started"]
    return Worker(
        env.client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow, AgentAdmissionWorkflow],
        activities=[*others, task_started, *ADMISSION_ACTIVITIES],
        workflow_runner=workflow_runner(),
    )


async def approve(handle: Any) -> None:
    request_id, action = await pending_request(handle)
    await handle.signal(AgentTaskWorkflow.approve, ApprovalDecision(request_id, action, "U_ALICE"))


async def status_of(handle: Any) -> TaskStatus:
    return (await handle.query(AgentTaskWorkflow.status)).status


async def until(check: Any) -> None:
    for _ in range(200):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in 10 s")


async def test_tasks_over_the_concurrency_limit_wait_in_line_and_all_finish(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script, said = per_task_script(), []
    yaml_text = limited("{max_concurrent_tasks: 1}", "line-test")
    async with admission_worker(ts_env, script, task_queue, said):
        first = await start(ts_env, task_input(yaml_text), task_queue)
        await pending_request(first)  # the first holds the only slot, waiting for approval
        second = await start(ts_env, task_input(yaml_text), task_queue)
        await until(_queued(said, 1))  # in line before the third asks: the line's order is known
        third = await start(ts_env, task_input(yaml_text), task_queue)
        await until(_queued(said, 2))
        assert await status_of(second) == TaskStatus.QUEUED
        assert script.model_inputs and {i.task_id for i in script.model_inputs} == {first.id}
        queued = {s.task_id: s.text for s in said if s.status == TaskStatus.QUEUED}
        assert "next in line" in queued[second.id]
        assert "1 task ahead of it" in queued[third.id]
        assert "max_concurrent_tasks: 1" in queued[second.id]

        for handle in (first, second, third):  # each runs only once the one before it ended
            await approve(handle)
            assert (await handle.result()).status == TaskStatus.SUCCESS
        admission = ts_env.client.get_workflow_handle(admission_workflow_id("default", "line-test"))
        line = await admission.query(AgentAdmissionWorkflow.snapshot)
        await _close_line(admission)
    assert line.running == [] and line.waiting == []
    assert len(script.tool_calls) == 3  # every task did its work: none was dropped


async def _close_line(admission: WorkflowHandle[Any, Any]) -> None:
    """Ends the agent's line workflow if it still runs: once idle it may have closed by itself
    (the time-skipping server skips ahead while a test waits on a result)."""
    try:
        await admission.terminate()
    except RPCError:
        assert (await admission.describe()).status != WorkflowExecutionStatus.RUNNING


def _queued(said: list[PostReplyInput], count: int) -> Any:
    async def check() -> bool:
        return sum(s.status == TaskStatus.QUEUED for s in said) >= count

    return check


async def test_a_task_cancelled_in_line_ends_cancelled_and_leaves_the_line(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script, said = per_task_script(), []
    yaml_text = limited("{max_concurrent_tasks: 1}", "cancel-test")
    async with admission_worker(ts_env, script, task_queue, said):
        first = await start(ts_env, task_input(yaml_text), task_queue)
        await pending_request(first)
        second = await start(ts_env, task_input(yaml_text), task_queue)
        await until(_queued(said, 1))
        await second.signal(AgentTaskWorkflow.cancel, CancelRequest(by="U_BOB", reason="not needed"))
        await until(_closed(second))  # not result(): waiting on it would skip the first's approval TTL
        assert await status_of(second) == TaskStatus.CANCELLED
        admission = ts_env.client.get_workflow_handle(admission_workflow_id("default", "cancel-test"))
        line = await admission.query(AgentAdmissionWorkflow.snapshot)
        assert line.waiting == [] and line.running == [first.id]
        await approve(first)
        assert (await first.result()).status == TaskStatus.SUCCESS
        await _close_line(admission)
    assert {c.task_id for c in script.model_inputs} == {first.id}


def _closed(handle: Any) -> Any:
    async def check() -> bool:
        return (await handle.describe()).close_time is not None

    return check


async def test_tasks_over_the_rate_start_when_the_minute_has_passed(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    answered: list[tuple[str, float]] = []
    script = Script([], default=lambda inp: say("ok"))
    said: list[PostReplyInput] = []
    yaml_text = limited("{tasks_per_minute: 1}", "rate-test").replace(
        "    require_for: [github.create_issue]\n", ""
    )
    async with admission_worker(ts_env, script, task_queue, said):
        first = await start(ts_env, task_input(yaml_text), task_queue)
        second = await start(ts_env, task_input(yaml_text), task_queue)
        for handle in (first, second):
            result = await handle.result()
            assert result.status == TaskStatus.SUCCESS
            described = await handle.describe()
            assert described.close_time is not None
            answered.append((handle.id, described.close_time.timestamp()))
    # The admission workflow is left to the server: with nothing left to run, the time-skipping
    # server skips to its 10-year execution timeout.
    # Both were started at once: whichever reached the admission second is the one held back.
    answered.sort(key=lambda pair: pair[1])
    queued = [s for s in said if s.status == TaskStatus.QUEUED]
    assert [s.task_id for s in queued] == [answered[1][0]]
    assert "tasks_per_minute: 1" in queued[0].text
    assert answered[1][1] - answered[0][1] >= 59  # the later one started a minute after the first
    assert timedelta(seconds=answered[1][1] - answered[0][1]) < timedelta(minutes=2)
