"""The approvals inbox and a decision from it, checked the way every surface checks one.

The inbox lists tasks whose OpenLoopStatus is WAITING_APPROVAL and asks each for its
pending request (the `status` query). A decision names the request id and action id the
person saw; before signalling, it is checked against the task's pending request and its
approvers (`workflows.approval_rule`: the ids the request's approvers resolved to; the agent
config the task started with when no worker answers), so the person hears at once whether
it counted and why not. A refused decision is signalled all the same, as a refused Slack click
is: the task refuses it by the same rule and records it (an `approval_ignored` audit row with
the reason, a refused entry in its timeline and in `openloop explain`). Only an expired
request's decision is not sent (the task's own timer ends the request); a refusal the task
cannot be told of is audited here.

A person may go by several names (a Slack user id and a GitHub login); a request is theirs
when its approvers hold any of them, and their decision is recorded under the name they hold.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.store.db import get_pool
from activities.store.ledger import write_audit
from config.agent import AgentConfig
from surfaces.decisions import closed_reason, refusal
from surfaces.task_lookup import worker_is_polling
from surfaces.timeline import story_from_history
from workers import history as histories
from workflows import approval_rule, policy, search
from workflows.agent_task import AgentTaskWorkflow
from workflows.approval_rule import DecisionProblem
from workflows.types import (
    ApprovalDecision,
    ApprovalRequest,
    AuditEvent,
    TaskInput,
    TaskStatus,
    TaskStatusView,
)

INBOX_LIMIT = 200
QUERY_TIMEOUT = timedelta(seconds=3)
LOOKUPS_AT_ONCE = 16  # waiting tasks asked at once by the inbox
CONFIRM_SECONDS = 5.0  # how long a decision waits for the task to say it took it


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
    may_approve: bool

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


def approver_name(agent: AgentConfig, pending: ApprovalRequest | None, names: Sequence[str]) -> str | None:
    """The first of the person's names that may decide the pending request (or, with none
    known, that the agent's approvers list holds)."""
    if pending is not None:
        return next((name for name in names if approval_rule.may_decide(pending, name)), None)
    return next((name for name in names if policy.may_approve(agent, name)), None)


async def inbox(client: Client, names: Sequence[str]) -> tuple[list[Pending], int]:
    """Pending requests the person called `names` may decide, and how many wait for others.

    Each waiting task is asked at once (up to LOOKUPS_AT_ONCE), so the page takes about one
    task's round trips, not one per task; only the person's own requests read the task's start."""
    query = histories.task_query(extra=f"{search.STATUS.name} = '{TaskStatus.WAITING_APPROVAL.value}'")
    executions = [
        execution
        async for execution in client.list_workflows(query, limit=INBOX_LIMIT)
        if execution.status == WorkflowExecutionStatus.RUNNING
    ]
    # A task on a queue no worker polls cannot answer its query.
    queues = sorted({execution.task_queue for execution in executions})
    polled = dict(
        zip(queues, await asyncio.gather(*(worker_is_polling(client, q) for q in queues)), strict=True)
    )
    gate = asyncio.Semaphore(LOOKUPS_AT_ONCE)

    async def look(task_id: str) -> Pending | bool | None:
        """The person's pending request, False when it waits for others, None when unknown."""
        async with gate:
            view = await status_view(client, task_id)
            if view is None or view.pending_approval is None:
                return None
            if not any(approval_rule.may_decide(view.pending_approval, name) for name in names):
                return False
            started = await task_input(client, task_id)
        if started is None:
            return None
        context = started.context
        return Pending(
            task_id=task_id,
            agent=started.agent.name,
            channel=context.channel,
            surface=context.surface,
            requester=context.user,
            request_text=started.request,
            approval=view.pending_approval,
            spent_usd=view.usage.cost_usd,
            may_approve=True,
        )

    found = await asyncio.gather(*(look(e.id) for e in executions if polled[e.task_queue]))
    mine = sorted(
        (item for item in found if isinstance(item, Pending)), key=lambda i: i.approval.expires_at_iso
    )
    return mine, sum(1 for item in found if item is False)


@dataclass
class Verdict:
    counted: bool
    status: int  # the HTTP status a plain form post answers with
    message: str


async def decide(
    client: Client,
    database_url: str | None,
    task_id: str,
    names: Sequence[str],
    request_id: str,
    action_id: str,
    approve: bool,
) -> Verdict:
    """Check a decision like the workflow will, signal it, and say whether it counted."""
    handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
    try:
        description = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return Verdict(False, 404, f"There is no task {task_id}.")
        raise
    if description.status != WorkflowExecutionStatus.RUNNING:
        return Verdict(False, 409, "This request is for a task that has already finished.")
    started = await task_input(client, task_id)
    if started is None:
        return Verdict(False, 409, "This task's start could not be read.")
    view = await status_view(client, task_id)
    pending = view.pending_approval if view is not None else None
    user = approver_name(started.agent, pending, names) or names[0]
    problem = _refusal(started.agent, view, request_id, action_id, user)
    if problem is not None and problem.kind == "expired":
        return Verdict(False, 409, f"Not counted: this request {closed_reason(problem)}.")
    signal = AgentTaskWorkflow.approve if approve else AgentTaskWorkflow.deny
    try:
        await handle.signal(signal, ApprovalDecision(request_id, action_id, approver=user, note="dashboard"))
    except RPCError:
        if problem is None:
            raise
        await _audit_refusal(database_url, started, user, request_id, approve, problem.reason)
    if problem is not None and problem.kind == "not_approver":
        listed = pending.approvers if pending is not None else started.agent.spec.approvals.approvers
        approvers = ", ".join(listed) or "nobody"
        return Verdict(
            False,
            403,
            f"You ({user}) are not an approver of {started.agent.name}; its approvers: {approvers}.",
        )
    if problem is not None:
        return Verdict(False, 409, f"Not counted: this request {closed_reason(problem)}.")
    word = "Approved" if approve else "Denied"
    if view is None:
        return Verdict(True, 202, f"{word} and sent; no worker answers now, the task decides when one runs.")
    if await _taken(client, task_id, request_id):
        return Verdict(True, 200, f"{word} by {user}: the task has it and goes on.")
    return Verdict(True, 202, f"{word} and sent; the task has not confirmed it yet.")


def _refusal(
    agent: AgentConfig, view: TaskStatusView | None, request_id: str, action_id: str, user: str
) -> DecisionProblem | None:
    """Why `user`'s decision would not count: the task's own rule against its pending request,
    or, when no worker answers, whether the agent it started with names them at all."""
    if view is not None:
        return refusal(view, request_id, action_id, user)
    if policy.may_approve(agent, user):
        return None
    return DecisionProblem("not_approver", f"{user} is not an approver of this agent")


async def _taken(client: Client, task_id: str, request_id: str) -> bool:
    deadline = time.monotonic() + CONFIRM_SECONDS
    while time.monotonic() < deadline:
        view = await status_view(client, task_id)
        if view is not None and (
            view.pending_approval is None or view.pending_approval.request_id != request_id
        ):
            return True
        await asyncio.sleep(0.1)
    return False


async def _audit_refusal(
    database_url: str | None, started: TaskInput, user: str, request_id: str, approve: bool, reason: str
) -> None:
    if not database_url:
        return
    agent: AgentConfig = started.agent
    pool = await get_pool(database_url)
    async with pool.connection() as conn:
        await write_audit(
            conn,
            AuditEvent(
                task_id=started.task_id,
                step=0,
                key=f"dashboard:{request_id}:{user}:{datetime.now(UTC).isoformat()}",
                agent=agent.name,
                workspace=agent.workspace,
                channel=started.context.channel,
                kind="approval_refused",
                actor=user,
                tool=None,
                arguments={"request_id": request_id, "decision": "approve" if approve else "deny"},
                outcome=f"{reason} (dashboard; the task could not be told)",
                approver=user,
            ),
        )
