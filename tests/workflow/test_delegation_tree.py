"""A tree of tasks on the time-skipping server: a subagent waiting for an approval shows on
its parent's status, and cancelling the parent (by its `cancel` signal or from Temporal)
cancels the children that still run."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from activities.tools.catalog import NATIVE_TOOLS
from config.loader import parse_agent
from tests.helpers import approve_when_pending, status_when
from tests.workflow.delegation_env import ISSUE, delegations, is_child
from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import start, worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.tools.agents import delegate
from workflows.types import (
    CancelRequest,
    ModelCallInput,
    ModelCallResult,
    SurfaceContext,
    TaskInput,
    TaskResult,
    TaskStatus,
)

LEAD = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: lead}
spec:
  model_policy: {default: scripted/model}
  tools:
    - {name: agent.delegate, permissions: ["agents:delegate"]}
    - {name: github.create_issue, permissions: [issues:write], limit_to: [acme/platform]}
  approvals:
    require_for: [github.create_issue]
    approvers: [U_ALICE, U_CAROL]
    ttl: 72h
  budget: {per_task_usd: 1.0}
"""


def lead_task() -> TaskInput:
    create_issue = NATIVE_TOOLS["github.create_issue"].spec
    return TaskInput(
        task_id=f"task-lead-{uuid.uuid4().hex[:10]}",
        agent=parse_agent(LEAD),
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="split this up",
        tools=[delegate.spec, create_issue],
    )


def children_open_issues(children: int) -> Callable[[ModelCallInput], ModelCallResult]:
    """The parent delegates; every child asks to open an issue (gated), then answers."""
    parent_calls: list[ModelCallInput] = []

    def answer(inp: ModelCallInput) -> ModelCallResult:
        if is_child(inp.task_id):
            asked = any(m.role == "tool" for m in inp.cursor.new_messages)
            return say("Opened it.") if asked else use("github.create_issue", ISSUE)
        parent_calls.append(inp)
        return delegations(children) if len(parent_calls) == 1 else say("All done.")

    return answer


def child_ids(script: Script) -> list[str]:
    return sorted({inp.task_id for inp in script.model_inputs if is_child(inp.task_id)})


async def test_a_child_waiting_for_approval_shows_on_the_parents_status(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=children_open_issues(1))
    async with worker(ts_env, script, task_queue):
        parent = await start(ts_env, lead_task(), task_queue)
        waiting = await status_when(parent, lambda s: s.last_action.startswith("waiting: "))
        [child_id] = child_ids(script)
        assert waiting.last_action == (
            f"waiting: subagent {child_id} waits for approval of github.create_issue by U_ALICE, U_CAROL"
        )
        assert waiting.status == TaskStatus.RUNNING and waiting.pending_approval is None  # the child's
        child = ts_env.client.get_workflow_handle_for(AgentTaskWorkflow.run, child_id)
        await approve_when_pending(child, "U_CAROL")
        await status_when(parent, lambda s: not s.last_action.startswith("waiting: "))
        result: TaskResult = await parent.result()
    assert result.status == TaskStatus.SUCCESS and result.reply == "All done."
    assert [call.tool for call in script.tool_calls] == ["github.create_issue"]


async def cancelled_children(env: WorkflowEnvironment, ids: list[str]) -> list[WorkflowExecutionStatus]:
    statuses = []
    for child_id in ids:
        handle = env.client.get_workflow_handle(child_id)
        try:
            await handle.result()
        except Exception:  # a cancelled child's result raises; its status is what counts
            pass
        statuses.append((await handle.describe()).status)
    return statuses


async def test_cancelling_the_parent_by_signal_cancels_its_running_children(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=children_open_issues(3))
    async with worker(ts_env, script, task_queue):
        parent = await start(ts_env, lead_task(), task_queue)
        await status_when(parent, lambda s: s.last_action.count("waits for approval") == 3)
        await parent.signal(AgentTaskWorkflow.cancel, CancelRequest("U_BOB", "not needed"))
        result: TaskResult = await parent.result()
        ids = child_ids(script)
        statuses = await cancelled_children(ts_env, ids)
    assert result.status == TaskStatus.CANCELLED and "cancelled by U_BOB" in result.reason
    assert len(ids) == 3 and statuses == [WorkflowExecutionStatus.CANCELED] * 3
    assert script.tool_calls == []  # nothing the children asked for ran
    assert (await parent.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_cancelling_the_parent_from_temporal_cancels_its_running_children(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=children_open_issues(2))
    async with worker(ts_env, script, task_queue):
        parent = await start(ts_env, lead_task(), task_queue)
        await status_when(parent, lambda s: s.last_action.count("waits for approval") == 2)
        await parent.cancel()
        statuses = await cancelled_children(ts_env, child_ids(script))
        try:
            await parent.result()
        except Exception:
            pass
        parent_status = (await parent.describe()).status
    assert statuses == [WorkflowExecutionStatus.CANCELED] * 2
    assert parent_status == WorkflowExecutionStatus.CANCELED
    assert script.tool_calls == []
