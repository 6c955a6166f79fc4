"""Approvals on the time-skipping server: long waits, expiry, and decisions that must not count."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from pydantic import TypeAdapter
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import AGENT_YAML, ARGS, issue_script, pending_request, start, task_input, worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.policy import action_id
from workflows.types import (
    DECISION_REFUSED,
    ApprovalDecision,
    Decision,
    DecisionVerdict,
    TaskStatus,
)


async def test_approval_waits_three_days_then_expires_and_executes_nothing(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = issue_script()
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(), task_queue)
        await pending_request(handle)
        await ts_env.sleep(timedelta(days=3, minutes=1))
        result = await handle.result()
    assert result.status == TaskStatus.APPROVAL_EXPIRED
    assert script.tool_calls == []
    assert [r.outcome for r in script.resolutions] == ["expired"]
    assert "approval_expired" in [a.kind for a in script.audits]


async def test_approval_after_two_days_executes_once(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    script = issue_script()
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(), task_queue)
        request_id, action = await pending_request(handle)
        await ts_env.sleep(timedelta(days=2))
        decision = ApprovalDecision(request_id, action, "U_ALICE")
        await handle.signal(AgentTaskWorkflow.approve, decision)
        await handle.signal(AgentTaskWorkflow.approve, decision)  # a double click
        result = await handle.result()
    assert result.status == TaskStatus.SUCCESS
    assert len(script.tool_calls) == 1
    assert script.tool_calls[0].approval is not None
    assert script.tool_calls[0].approval.approver == "U_ALICE"
    assert script.resolutions[0].outcome == "approved"
    assert script.resolutions[0].decided_by == "U_ALICE"
    # The approval wait is not charged against the task's wall clock.
    assert result.usage.waited_seconds >= timedelta(days=2).total_seconds()


async def test_decisions_for_other_arguments_or_from_non_approvers_are_ignored(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = issue_script()
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(), task_queue)
        request_id, action = await pending_request(handle)
        other_args = action_id("github.create_issue", {**ARGS, "title": "Something else"})
        await handle.signal(AgentTaskWorkflow.approve, ApprovalDecision(request_id, other_args, "U_ALICE"))
        await handle.signal(AgentTaskWorkflow.approve, ApprovalDecision(request_id, action, "U_MALLORY"))
        await handle.signal(AgentTaskWorkflow.approve, ApprovalDecision("apr-forged", action, "U_ALICE"))
        await asyncio.sleep(0.3)
        status = await handle.query(AgentTaskWorkflow.status)
        assert status.status == TaskStatus.WAITING_APPROVAL
        await ts_env.sleep(timedelta(days=3, minutes=1))
        result = await handle.result()
    assert result.status == TaskStatus.APPROVAL_EXPIRED
    assert script.tool_calls == []
    ignored = [a for a in script.audits if a.kind == "approval_ignored"]
    assert {a.approver for a in ignored} == {"U_ALICE", "U_MALLORY"}
    assert any("different arguments" in a.outcome for a in ignored)
    assert any("not an approver" in a.outcome for a in ignored)


async def test_the_decision_update_answers_at_once_and_a_refusal_never_reaches_history(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = issue_script()
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(), task_queue)
        request_id, action = await pending_request(handle)
        other_args = action_id("github.create_issue", {**ARGS, "title": "Something else"})
        refused: dict[str, DecisionVerdict] = {}
        for name, answer in (
            ("arguments", ApprovalDecision(request_id, other_args, "U_ALICE")),
            ("outsider", ApprovalDecision(request_id, action, "U_MALLORY")),
            ("forged", ApprovalDecision("apr-forged", action, "U_ALICE")),
        ):
            with pytest.raises(WorkflowUpdateFailedError) as failed:
                await handle.execute_update(AgentTaskWorkflow.decide, Decision(approve=answer))
            cause = failed.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == DECISION_REFUSED
            refused[name] = TypeAdapter(DecisionVerdict).validate_python(cause.details[0])
        both = ApprovalDecision(request_id, action, "U_ALICE")
        with pytest.raises(WorkflowUpdateFailedError):  # one decision at a time
            await handle.execute_update(AgentTaskWorkflow.decide, Decision(approve=both, deny=both))
        counted = await handle.execute_update(AgentTaskWorkflow.decide, Decision(approve=both))
        with pytest.raises(WorkflowUpdateFailedError) as again:  # a double click
            await handle.execute_update(AgentTaskWorkflow.decide, Decision(approve=both))
        result = await handle.result()
        history = await handle.fetch_history()
    assert counted == DecisionVerdict(True)
    assert {name: (v.problem, v.reason) for name, v in refused.items()} == {
        "arguments": ("mismatch", "the decision is for different arguments than the pending action"),
        "outsider": ("not_approver", "U_MALLORY is not an approver of this agent"),
        "forged": ("closed", "the decision is for another request"),
    }
    audit = refused["outsider"].audit  # what the surface records: the task's own audit row
    assert audit is not None and refused["outsider"].approvers == ["U_ALICE"]
    assert (audit.kind, audit.approver, audit.tool, audit.outcome) == (
        "approval_refused",
        "U_MALLORY",
        "github.create_issue",
        "U_MALLORY is not an approver of this agent",
    )
    assert "already decided" in str(again.value.cause)
    assert result.status == TaskStatus.SUCCESS and len(script.tool_calls) == 1
    assert script.tool_calls[0].approval is not None and script.tool_calls[0].approval.approver == "U_ALICE"
    # Only the decision that counted is in the history; the task itself audited no refusal.
    updates = [e.workflow_execution_update_accepted_event_attributes for e in history.events]
    assert [u.accepted_request.input.name for u in updates if u.HasField("accepted_request")] == [
        "openloop.task.decide"
    ]
    assert not [a for a in script.audits if a.kind in ("approval_ignored", "approval_refused")]


async def test_denial_is_told_to_the_model_and_nothing_runs(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([use("github.create_issue", json.dumps(ARGS)), say("Understood, I will not open it.")])
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(), task_queue)
        request_id, action = await pending_request(handle)
        await handle.signal(AgentTaskWorkflow.deny, ApprovalDecision(request_id, action, "U_ALICE"))
        result = await handle.result()
    assert script.tool_calls == []
    assert result.reply == "Understood, I will not open it."
    told = script.model_inputs[1].new_messages[-1]
    assert told.role == "tool" and "denied" in told.content


async def test_deny_can_stop_the_task(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    script = issue_script()
    yaml_text = AGENT_YAML.replace("ttl: 72h", "ttl: 72h\n    on_denied: stop")
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(yaml_text), task_queue)
        request_id, action = await pending_request(handle)
        await handle.signal(AgentTaskWorkflow.deny, ApprovalDecision(request_id, action, "U_ALICE"))
        result = await handle.result()
    assert result.status == TaskStatus.APPROVAL_DENIED
    assert script.tool_calls == []
    assert "U_ALICE" in result.reason
