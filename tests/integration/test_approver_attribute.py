"""The inbox at scale: a waiting task publishes who may decide its request (the
OpenLoopApprovers search attribute), and the approvals inbox lists, a page at a time, only
the tasks that name the person, asking no other task (real dev server, real workflow)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from surfaces.web import approval_inbox
from tests.helpers import Handle, approve_when_pending, pending_approval
from tests.integration.dashboard_env import start_dashboard_task
from tests.workflow.record_histories import ISSUE_ARGS, ISSUES_YAML
from tests.workflow.scripted import Script, say, use
from workers.sandbox import workflow_runner
from workflows import approver_attribute, search
from workflows.agent_task import AgentTaskWorkflow
from workflows.message_types import ApprovalRequest
from workflows.types import TaskStatus

pytestmark = pytest.mark.needs_server


def issues_agent(approvers: str) -> str:
    return ISSUES_YAML.replace("approvers: [U_ALICE]", f"approvers: [{approvers}]")


@pytest.fixture
async def worker(client: Client, task_queue: str) -> AsyncIterator[None]:
    script = Script(
        [],
        default=lambda inp: (
            say("Opened it.") if inp.step > 1 else use("github.create_issue", ISSUE_ARGS, "c1")
        ),
    )
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=script.activities(),
        workflow_runner=workflow_runner(),
    ):
        yield


async def waiting_task(client: Client, task_queue: str, approvers: str, suffix: str) -> Handle:
    handle = await start_dashboard_task(
        client, issues_agent(approvers), f"triage-{suffix}", f"eng-{suffix}", task_queue, prefix="task-inbox"
    )
    await pending_approval(handle)
    return handle


async def published(handle: Handle) -> list[str] | None:
    return (await handle.describe()).typed_search_attributes.get(search.APPROVERS)


async def memo(handle: Handle) -> approver_attribute.PendingMemo | None:
    described = await handle.describe()
    if approver_attribute.MEMO not in described.raw_description.workflow_execution_info.memo.fields:
        return None
    value = await described.memo_value(approver_attribute.MEMO, type_hint=approver_attribute.PendingMemo)
    return value if isinstance(value, approver_attribute.PendingMemo) else None


async def until_listed(client: Client, query: str, count: int) -> None:
    for _ in range(100):  # visibility is eventually consistent
        if (await client.count_workflows(query)).count >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"never {count} listed for {query}")


async def test_a_waiting_task_publishes_who_may_decide_until_it_is_decided(
    client: Client, task_queue: str, worker: None
) -> None:
    handle = await waiting_task(client, task_queue, "U_ALICE, U_CAROL", uuid.uuid4().hex[:8])
    assert await published(handle) == ["U_ALICE", "U_CAROL"]
    shown = await memo(handle)
    assert shown is not None and shown.complete and shown.requester == "U_BOB"
    assert shown.approval.tool == "github.create_issue" and shown.approval.arguments == json.loads(ISSUE_ARGS)
    await approve_when_pending(handle, approver="U_CAROL")
    assert (await handle.result()).status == TaskStatus.SUCCESS
    assert await published(handle) is None and await memo(handle) is None


async def test_the_inbox_pages_the_persons_own_requests_and_asks_no_other_task(
    client: Client, task_queue: str, worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix = uuid.uuid4().hex[:8]
    alice, dave = f"U_ALICE_{suffix}", f"U_DAVE_{suffix}"
    hers = [await waiting_task(client, task_queue, alice, suffix) for _ in range(3)]
    his = await waiting_task(client, task_queue, dave, suffix)
    await until_listed(client, approval_inbox.mine_query([alice]), 3)
    monkeypatch.setattr(approval_inbox, "PAGE_SIZE", 2)
    asked: list[str] = []
    status_view = approval_inbox.status_view

    async def counted(client: Client, task_id: str) -> Any:
        asked.append(task_id)
        return await status_view(client, task_id)

    monkeypatch.setattr(approval_inbox, "status_view", counted)
    try:
        first = await approval_inbox.inbox(client, ["cli:nobody", alice])
        assert len(first.pending) == 2 and first.next_page is not None
        assert all(p.approver == alice and p.approval.tool == "github.create_issue" for p in first.pending)
        second = await approval_inbox.inbox(client, [alice], first.next_page)
        assert second.next_page is None
        listed = [p.task_id for p in first.pending + second.pending]
        assert sorted(listed) == sorted(h.id for h in hers)
        assert asked == []  # each listed task published its request: none was asked
        assert first.others >= 1  # Dave's, at least, waits for someone else
        theirs = await approval_inbox.inbox(client, [dave])
        assert [p.task_id for p in theirs.pending] == [his.id]
    finally:
        for handle in [*hers, his]:
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate("test over")


def test_a_set_too_large_to_publish_says_ask_the_task() -> None:
    def request(approvers: list[str]) -> ApprovalRequest:
        return ApprovalRequest(
            request_id="r",
            action_id="a",
            tool="t",
            arguments={},
            approvers=approvers,
            requested_at_iso="",
            expires_at_iso="",
            model="m",
            estimated_cost_usd=0.0,
        )

    assert approver_attribute.published(request(["U_B", "U_A", "U_A"])) == ["U_A", "U_B"]
    many = [f"U_{i:05d}" for i in range(approver_attribute.MAX_IDS + 1)]
    assert approver_attribute.published(request(many)) == [approver_attribute.ASK_THE_TASK]
    assert approver_attribute.published(None) == []
    big = request(["U_A"])
    big.arguments = {"body": "x" * (approver_attribute.MAX_MEMO_ARGUMENTS + 1)}
    shown = approver_attribute.memo_of(big, "U_BOB", "file it")
    assert not shown.complete and shown.approval.arguments == {}  # the inbox asks that task
