"""The approvals inbox and a decision from it, sent the way every surface sends one.

The inbox lists the waiting tasks whose published approvers (OpenLoopApprovers, kept by the
task with the one approval rule) name the person, a page at a time, and asks only those for
their pending request (the `status` query). A decision names the request id and action id the
person saw and goes to the task through its decision update (`surfaces.decisions.decide`):
the task applies its rule and answers at once whether it counted and why not; a refusal is
audited with its reason.

A person may go by several names (a Slack user id and a GitHub login); a request is theirs
when its approvers hold any of them, and the inbox's form names the one they hold
(`Pending.approver`), under which their decision is sent and recorded.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus

from surfaces.decisions import FAILED, NO_ANSWER, NO_TASK, closed_reason
from surfaces.decisions import decide as send_decision
from surfaces.task_lookup import worker_is_polling
from surfaces.timeline import story_from_history
from workers import history as histories
from workflows import approval_rule, search
from workflows.agent_task import AgentTaskWorkflow
from workflows.approver_attribute import ASK_THE_TASK, MEMO, PendingMemo
from workflows.types import (
    ApprovalDecision,
    ApprovalRequest,
    Decision,
    TaskInput,
    TaskStatus,
    TaskStatusView,
)

PAGE_SIZE = 25  # requests a page of the inbox lists
QUERY_TIMEOUT = timedelta(seconds=3)
LOOKUPS_AT_ONCE = 16  # waiting tasks asked at once by the inbox


@dataclass
class Pending:
    task_id: str
    agent: str
    channel: str
    surface: str
    requester: str
    request_text: str
    approval: ApprovalRequest
    spent_usd: float
    approver: str  # the person's name that may decide it, which the decision is sent as

    @property
    def expires_at(self) -> datetime | None:
        try:
            return datetime.fromisoformat(self.approval.expires_at_iso)
        except ValueError:
            return None


async def status_view(client: Client, task_id: str) -> TaskStatusView | None:
    """The task's answer to `status`, or None when no worker answers in time."""
    handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
    try:
        return await handle.query(AgentTaskWorkflow.status, rpc_timeout=QUERY_TIMEOUT)
    except Exception:  # query failures come in several types; all mean "no answer"
        return None


async def task_input(client: Client, task_id: str) -> TaskInput | None:
    """What the task started with (its agent config included), from its first event (one
    event fetched, however long the history)."""
    async for event in client.get_workflow_handle(task_id).fetch_history_events(page_size=1):
        return story_from_history([event]).task
    return None


@dataclass
class InboxPage:
    pending: list[Pending]  # the person's own, soonest to expire first
    others: int  # requests waiting for other approvers
    next_page: str | None = None  # the token of the next page of the person's requests


def _quoted(names: Sequence[str]) -> str:
    # Names are user ids and logins; one that could break out of the quotes is never sent.
    return ", ".join(f"'{name}'" for name in names if "'" not in name and "\\" not in name)


def mine_query(names: Sequence[str]) -> str:
    """Waiting tasks that may be the person's: their names published as approvers, a set too
    large to publish, or none published (a task started before the attribute existed)."""
    key = search.APPROVERS.name
    listed = _quoted([*names, ASK_THE_TASK])
    return histories.task_query(extra=f"{_WAITING} AND ({key} IN ({listed}) OR {key} IS NULL)")


_WAITING = f"{search.STATUS.name} = '{TaskStatus.WAITING_APPROVAL.value}'"


async def inbox(client: Client, names: Sequence[str], page: str | None = None) -> InboxPage:
    """One page of the pending requests the person called `names` may decide, and how many
    wait for others.

    The visibility store lists only the tasks whose published approvers hold one of the names
    (`workflows.approver_attribute`), a page at a time, with the request each published; only a
    task that published none (or not all of it) is asked, at once (up to LOOKUPS_AT_ONCE)."""
    waiting = await client.count_workflows(histories.task_query(extra=_WAITING))
    if not names:
        return InboxPage([], waiting.count)
    query = mine_query(names)
    token = base64.urlsafe_b64decode(page.encode()) if page else None
    listing = client.list_workflows(query, page_size=PAGE_SIZE, next_page_token=token)
    await listing.fetch_next_page()
    executions = [e for e in listing.current_page or [] if e.status == WorkflowExecutionStatus.RUNNING]
    listed = (await client.count_workflows(query)).count
    # A task on a queue no worker polls cannot answer its query (asked when its memo is not enough).
    queues = sorted({execution.task_queue for execution in executions})
    polled = dict(
        zip(queues, await asyncio.gather(*(worker_is_polling(client, q) for q in queues)), strict=True)
    )
    gate = asyncio.Semaphore(LOOKUPS_AT_ONCE)

    async def look(execution: WorkflowExecution) -> Pending | bool | None:
        """The person's pending request, False when it waits for others, None when unknown."""
        memo = await _memo(execution)
        if memo is not None:
            return _theirs(names, execution, memo.approval, memo.requester, memo.request)
        if not polled[execution.task_queue]:
            return None
        async with gate:
            view = await status_view(client, execution.id)
            if view is None or view.pending_approval is None:
                return None
            if not any(approval_rule.may_decide(view.pending_approval, name) for name in names):
                return False
            started = await task_input(client, execution.id)
        if started is None:
            return None
        found = _theirs(names, execution, view.pending_approval, started.context.user, started.request)
        if isinstance(found, Pending):
            found.agent, found.spent_usd = started.agent.name, view.usage.cost_usd
        return found

    found = await asyncio.gather(*(look(e) for e in executions))
    mine = sorted(
        (item for item in found if isinstance(item, Pending)), key=lambda i: i.approval.expires_at_iso
    )
    not_mine = sum(1 for item in found if item is False)
    following = listing.next_page_token
    return InboxPage(
        mine,
        max(0, waiting.count - listed) + not_mine,
        base64.urlsafe_b64encode(following).decode() if following else None,
    )


async def _memo(execution: WorkflowExecution) -> PendingMemo | None:
    """The request the task published (`workflows.approver_attribute`), when whole."""
    try:
        if MEMO not in execution.raw_info.memo.fields:  # removed once decided; never set by older tasks
            return None
        memo = await execution.memo_value(MEMO, type_hint=PendingMemo)
    except Exception:  # a memo written by another version: ask the task instead
        return None
    return memo if isinstance(memo, PendingMemo) and memo.complete else None


def _theirs(
    names: Sequence[str], execution: WorkflowExecution, approval: ApprovalRequest, requester: str, asked: str
) -> Pending | bool:
    approver = next((name for name in names if approval_rule.may_decide(approval, name)), None)
    if approver is None:
        return False
    attrs = execution.typed_search_attributes
    return Pending(
        task_id=execution.id,
        agent=attrs.get(search.AGENT) or "",
        channel=attrs.get(search.CHANNEL) or "",
        surface=attrs.get(search.SURFACE) or "",
        requester=requester,
        request_text=asked,
        approval=approval,
        spent_usd=attrs.get(search.COST_USD) or 0.0,
        approver=approver,
    )


@dataclass
class Verdict:
    counted: bool
    status: int  # the HTTP status a plain form post answers with
    message: str


async def decide(
    client: Client,
    database_url: str | None,
    task_id: str,
    user: str,
    request_id: str,
    action_id: str,
    approve: bool,
) -> Verdict:
    """Send the decision through the task's decision update; say whether it counted and why not."""
    answer = ApprovalDecision(request_id, action_id, approver=user, note="dashboard")
    decision = Decision(approve=answer) if approve else Decision(deny=answer)
    told = await send_decision(client.get_workflow_handle(task_id), database_url, decision)
    word = "Approved" if approve else "Denied"
    if told.counted:
        return Verdict(True, 200, f"{word} by {user}: the task has it and goes on.")
    if told.problem == NO_TASK:
        return Verdict(False, 404, f"There is no task {task_id}.")
    if told.problem == NO_ANSWER:
        return Verdict(False, 202, f"Not confirmed: {told.reason}. It counts if the request is open then.")
    if told.problem == "not_approver":
        approvers = ", ".join(told.approvers) or "nobody"
        return Verdict(False, 403, f"Not counted: {told.reason}; its approvers: {approvers}.")
    if told.problem in ("invalid", FAILED):
        return Verdict(False, 400, f"Not counted: {told.reason}.")
    return Verdict(False, 409, f"Not counted: this request {closed_reason(told.problem)}.")
