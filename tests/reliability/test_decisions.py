"""Approval decisions that must execute nothing, or nothing twice: a decision replayed from
an earlier request (even for the very same action), a decision sent before the request
exists, and denials from someone who may not decide or for other arguments.
(Non-approvers' approvals, other arguments and forged request ids:
tests/workflow/test_approvals.py; a replay after continue-as-new: test_continue_as_new.py.)
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import AGENT_YAML, pending_request, start, task_input, worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.policy import action_id, call_key
from workflows.types import ApprovalDecision, TaskStatus

ARGS = {"repo": "acme/platform", "title": "Same issue, asked twice"}
SAME = json.dumps(ARGS)


def ignored(script: Script) -> list[str]:
    return [a.outcome for a in script.audits if a.kind == "approval_ignored"]


async def test_a_decision_replayed_from_an_earlier_request_never_approves_the_next(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script(
        [
            use("github.create_issue", SAME, "c1"),
            use("github.create_issue", SAME, "c2"),
            say("One issue opened; the second was not approved."),
        ]
    )
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(), task_queue)
        first_id, first_action = await pending_request(handle)
        first = ApprovalDecision(first_id, first_action, "U_ALICE")
        await handle.signal(AgentTaskWorkflow.approve, first)
        for _ in range(100):
            second_id, second_action = await pending_request(handle)
            if second_id != first_id:
                break
            await asyncio.sleep(0.05)
        assert second_id != first_id and second_action == first_action  # same tool, same args
        await handle.signal(AgentTaskWorkflow.approve, first)  # the old decision, replayed
        await asyncio.sleep(0.3)
        assert (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_APPROVAL
        await ts_env.sleep(timedelta(days=3, minutes=1))
        result = await handle.result()
    assert result.status == TaskStatus.APPROVAL_EXPIRED
    assert len(script.tool_calls) == 1 and script.tool_calls[0].approval is not None
    assert script.tool_calls[0].approval.request_id == first_id
    assert ignored(script) == ["this request was already decided"]


async def test_a_decision_sent_before_the_request_exists_approves_nothing(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([use("github.create_issue", SAME, "c1"), say("Never approved.")])
    inp = task_input()
    # Request ids are predictable; a decision cannot get ahead of the request it names.
    predicted = ApprovalDecision(
        f"apr-{inp.task_id[-24:]}-1-{call_key(0, 'github.create_issue', ARGS)}",
        action_id("github.create_issue", ARGS),
        "U_ALICE",
    )
    handle = await start(ts_env, inp, task_queue)  # no worker yet: the signal is first in line
    await handle.signal(AgentTaskWorkflow.approve, predicted)
    async with worker(ts_env, script, task_queue):
        request_id, _ = await pending_request(handle)
        assert request_id == predicted.request_id
        await asyncio.sleep(0.3)
        assert (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_APPROVAL
        await ts_env.sleep(timedelta(days=3, minutes=1))
        result = await handle.result()
    assert result.status == TaskStatus.APPROVAL_EXPIRED and script.tool_calls == []
    assert ignored(script) == ["no approval is pending"]


async def test_denials_without_authority_or_for_other_arguments_change_nothing(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    yaml_text = AGENT_YAML.replace("ttl: 72h", "ttl: 72h\n    on_denied: stop")
    script = Script([use("github.create_issue", SAME, "c1"), say("Opened it.")])
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(yaml_text), task_queue)
        request_id, action = await pending_request(handle)
        other = action_id("github.create_issue", {**ARGS, "title": "Something else"})
        await handle.signal(AgentTaskWorkflow.deny, ApprovalDecision(request_id, action, "U_MALLORY"))
        await handle.signal(AgentTaskWorkflow.deny, ApprovalDecision(request_id, other, "U_ALICE"))
        await asyncio.sleep(0.3)
        assert (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_APPROVAL
        await handle.signal(AgentTaskWorkflow.approve, ApprovalDecision(request_id, action, "U_ALICE"))
        result = await handle.result()
    assert result.status == TaskStatus.SUCCESS and len(script.tool_calls) == 1
    assert sorted(ignored(script)) == [
        "U_MALLORY is not an approver of this agent",
        "the decision is for different arguments than the pending action",
    ]
