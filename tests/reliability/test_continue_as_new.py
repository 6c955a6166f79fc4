"""Long tasks continue-as-new between steps, long before Temporal's history limits, and the
next run carries what the task must remember: the step count, the transcript position, the
spend and its ceilings, the decision log and the approval requests already decided.

Continue-as-new happens only at the top of the loop, between steps. A task waiting for an
approval is inside a step, so it never continues-as-new while a request is pending: the
pending approval stays in the run that asked for it, and the run after the decision
carries the decided request id (so a replayed decision is refused there too).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from activities.tools.catalog import specs_for
from config.loader import parse_agent
from tests.helpers import eventually_async
from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import pending_request, start, worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import (
    ApprovalDecision,
    ModelCallInput,
    ModelCallResult,
    SurfaceContext,
    TaskInput,
    TaskResult,
    TaskStatus,
)

AGENT_YAML = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: long-runner}
spec:
  model_policy: {default: scripted/model}
  tools:
    - {name: memory.search, permissions: [memory:read]}
    - {name: github.create_issue, permissions: [issues:write], limit_to: [acme/platform]}
  approvals: {require_for: [github.create_issue], approvers: [U_ALICE], ttl: 72h}
  budget: {per_task_usd: 10}
  limits: {max_iterations: ITERATIONS, token_limit: 1000000, wall_clock: 2h}
"""
STEP_COST = 0.001
ISSUE = json.dumps({"repo": "acme/platform", "title": "Found on step 10"})
HISTORY_SUGGESTS_CAN_AT_EVENTS = 4_000  # a conservative reading of Temporal's suggestion


def task(iterations: int, steps_per_run: int) -> TaskInput:
    agent = parse_agent(AGENT_YAML.replace("ITERATIONS", str(iterations)))
    return TaskInput(
        task_id=f"task-rel-can-{uuid.uuid4().hex[:10]}",
        agent=agent,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="work through the backlog",
        max_steps_per_run=steps_per_run,
        tools=specs_for(agent),
    )


def step_answer(last: int, issue_at: int | None = None) -> Callable[[ModelCallInput], ModelCallResult]:
    """Search with fresh arguments each step; open an issue at `issue_at`; answer at `last`."""

    def answer(inp: ModelCallInput) -> ModelCallResult:
        if inp.step == last:
            return say(f"Done after {last} steps.", cost=STEP_COST)
        if inp.step == issue_at:
            return use("github.create_issue", ISSUE, f"c{inp.step}", cost=STEP_COST)
        return use("memory.search", json.dumps({"query": f"q{inp.step}"}), f"c{inp.step}", cost=STEP_COST)

    return answer


async def later_run(handle: WorkflowHandle[AgentTaskWorkflow, TaskResult], run_id: str) -> bool:
    return (await handle.describe()).run_id != run_id


async def runs_of(client: Client, workflow_id: str, first_run_id: str) -> list[WorkflowHistory]:
    """Every run of the task, following the continue-as-new chain from the first."""
    histories, run_id = [], first_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        last = history.events[-1]
        run_id = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
            else ""
        )
    return histories


async def test_a_hundred_step_task_continues_as_new_and_carries_its_state(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=step_answer(100, issue_at=10))
    inp = task(iterations=150, steps_per_run=25)
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, inp, task_queue)
        first_run = (await handle.describe()).run_id
        request_id, action = await pending_request(handle)
        decision = ApprovalDecision(request_id, action, "U_ALICE")
        await handle.signal(AgentTaskWorkflow.approve, decision)
        await eventually_async(lambda: later_run(handle, first_run), "a later run")
        await handle.signal(AgentTaskWorkflow.approve, decision)
        result = await handle.result()
        explanation = await handle.query(AgentTaskWorkflow.explain)

    assert result.status == TaskStatus.SUCCESS and result.reply == "Done after 100 steps."
    assert result.steps == 100 and result.usage.iterations == 100
    assert abs(result.usage.cost_usd - 100 * STEP_COST) < 1e-9  # the spend of every run
    # The next run picked up where the last stopped: steps, transcript, headroom.
    steps = [i.step for i in script.model_inputs]
    assert steps == list(range(1, 101))
    positions = [i.transcript_upto for i in script.model_inputs]
    assert positions == sorted(positions) and positions[-1] == 3 + 98 * 2  # 2 messages a step
    assert abs(script.model_inputs[-1].usd_headroom - (10 - 99 * STEP_COST)) < 1e-9
    # The approved issue ran once, and the replayed decision was refused in a later run.
    assert [c.tool for c in script.tool_calls].count("github.create_issue") == 1
    ignored = [a for a in script.audits if a.kind == "approval_ignored"]
    assert len(ignored) == 1 and "already decided" in ignored[0].outcome

    histories = await runs_of(ts_env.client, inp.task_id, first_run)
    assert len(histories) == 4  # 25 steps a run
    sizes = [len(h.events) for h in histories]
    assert max(sizes) < HISTORY_SUGGESTS_CAN_AT_EVENTS / 4, sizes
    assert max(len(h.to_json()) for h in histories) < 1_000_000  # far from 50 MB
    assert any("continuing as new after step 75 (run 4)" in d for d in explanation.decisions)


async def test_the_iteration_ceiling_counts_across_runs(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    script = Script(
        [],
        default=lambda inp: (
            say("Summary of 30 searches.") if not inp.offered_tools else step_answer(10_000)(inp)
        ),
    )
    inp = task(iterations=30, steps_per_run=7)
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, inp, task_queue)
        await ts_env.sleep(timedelta(hours=73))  # nobody extends the budget
        result = await handle.result()
    assert result.status == TaskStatus.BUDGET_EXHAUSTED and "iterations" in result.reason
    assert result.usage.iterations == 30  # not 7, and not without end
    assert [bool(i.offered_tools) for i in script.model_inputs].count(True) == 30


async def test_no_continue_as_new_while_an_approval_is_pending(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=step_answer(4, issue_at=2))
    inp = task(iterations=20, steps_per_run=2)  # the run is due to end at the approval step
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, inp, task_queue)
        asked_in = (await handle.describe()).run_id
        request_id, action = await pending_request(handle)
        await ts_env.sleep(timedelta(days=2))
        status = await handle.query(AgentTaskWorkflow.status)
        assert status.status == TaskStatus.WAITING_APPROVAL
        assert status.pending_approval is not None and status.pending_approval.request_id == request_id
        assert (await handle.describe()).run_id == asked_in  # still the run that asked
        decision = ApprovalDecision(request_id, action, "U_ALICE")
        await handle.signal(AgentTaskWorkflow.approve, decision)
        await eventually_async(lambda: later_run(handle, asked_in), "continue-as-new after the step")
        await handle.signal(AgentTaskWorkflow.approve, decision)  # a replay into the new run
        result = await handle.result()
    assert result.status == TaskStatus.SUCCESS
    assert [c.tool for c in script.tool_calls].count("github.create_issue") == 1
    assert result.usage.waited_seconds >= timedelta(days=2).total_seconds()  # carried over
    ignored = [a for a in script.audits if a.kind == "approval_ignored"]
    assert [a.outcome for a in ignored] == ["this request was already decided"]
