"""A seven-day approval wait across worker restarts, on the time-skipping server.

The wait is a durable timer: workers come and go (each new worker replays the task from
its history), the request stays the same, and a decision on day seven executes the action
once. With no decision the request expires at its TTL and nothing runs, even for a
decision that arrives afterwards.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import pending_request, start, task_input
from tests.workflow.task_env import worker as approvals_worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, TaskInput, TaskResult, TaskStatus

AGENT_YAML = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: patient}
spec:
  model_policy: {default: scripted/model}
  tools:
    - {name: github.create_issue, permissions: [issues:write], limit_to: [acme/platform]}
  approvals: {require_for: [github.create_issue], approvers: [U_ALICE], ttl: 7d}
"""
ARGS = json.dumps({"repo": "acme/platform", "title": "Rotate the deploy key"})
SEVEN_DAYS = timedelta(days=7)


def worker(env: WorkflowEnvironment, script: Script, task_queue: str) -> Worker:
    """A worker that keeps nothing cached: each workflow task replays the history, as on a
    freshly started process (and no task is left on the sticky queue of a stopped one)."""
    return approvals_worker(env, script, task_queue, max_cached_workflows=0)


def task() -> TaskInput:
    return replace(
        task_input(AGENT_YAML),
        task_id=f"task-rel-wait-{uuid.uuid4().hex[:10]}",
        request="open an issue to rotate the deploy key",
    )


async def still_waiting(
    env: WorkflowEnvironment, handle: WorkflowHandle[AgentTaskWorkflow, TaskResult], task_queue: str
) -> str:
    """With a fresh worker (it replays the task), the same request is still pending."""
    async with worker(env, Script([]), task_queue):
        status = await handle.query(AgentTaskWorkflow.status)
    assert status.status == TaskStatus.WAITING_APPROVAL
    assert status.pending_approval is not None
    return status.pending_approval.request_id


async def test_a_seven_day_wait_survives_worker_restarts_and_executes_once(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    asking, deciding = Script([use("github.create_issue", ARGS)]), Script([say("Opened it.")])
    async with worker(ts_env, asking, task_queue):
        handle = await start(ts_env, task(), task_queue)
        request_id, action = await pending_request(handle)
        pending = (await handle.query(AgentTaskWorkflow.status)).pending_approval
    assert pending is not None
    asked_at = datetime.fromisoformat(pending.requested_at_iso)
    assert datetime.fromisoformat(pending.expires_at_iso) - asked_at == SEVEN_DAYS

    await ts_env.sleep(timedelta(days=3))  # no worker at all
    assert await still_waiting(ts_env, handle, task_queue) == request_id
    await ts_env.sleep(timedelta(days=3, hours=23))
    async with worker(ts_env, deciding, task_queue):
        await handle.signal(AgentTaskWorkflow.approve, ApprovalDecision(request_id, action, "U_ALICE"))
        result = await handle.result()

    assert result.status == TaskStatus.SUCCESS and result.reply == "Opened it."
    assert asking.tool_calls == [] and len(deciding.tool_calls) == 1
    assert deciding.tool_calls[0].approval is not None
    assert deciding.tool_calls[0].approval.request_id == request_id
    assert result.usage.waited_seconds >= timedelta(days=6, hours=23).total_seconds()


async def test_a_seven_day_wait_with_no_decision_expires_and_executes_nothing(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    asking = Script([use("github.create_issue", ARGS)])
    async with worker(ts_env, asking, task_queue):
        handle = await start(ts_env, task(), task_queue)
        request_id, action = await pending_request(handle)
    await ts_env.sleep(timedelta(days=4))
    assert await still_waiting(ts_env, handle, task_queue) == request_id
    closing = Script([])
    async with worker(ts_env, closing, task_queue):  # the expiry timer fires on this one
        await ts_env.sleep(timedelta(days=3, minutes=1))
        result = await handle.result()
        with pytest.raises(RPCError):  # a decision after expiry reaches nothing
            await handle.signal(AgentTaskWorkflow.approve, ApprovalDecision(request_id, action, "U_ALICE"))

    assert result.status == TaskStatus.APPROVAL_EXPIRED and "7d" in result.reason
    assert asking.tool_calls == [] and closing.tool_calls == []
    assert [r.outcome for r in closing.resolutions] == ["expired"]
    assert "approval_expired" in [a.kind for a in closing.audits]
    assert closing.model_inputs == []  # the model was not asked to carry on either
