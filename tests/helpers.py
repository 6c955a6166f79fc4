"""Waiting from a test: for a condition to hold, and for a running task to ask for approval.

`eventually` (plain code) and `eventually_async` (in an event loop) poll a check until it
holds, and fail naming what they waited for. A task's `status` query is polled the same way:
the workflow answers it from its own state, so a test that needs the pending request (its
id, its action, its approvers) polls here rather than guessing how long the model and the
policy take. Every deadline is wall-clock time, not a number of tries, so a loaded machine
gets the same patience as an idle one.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Collection
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, ApprovalRequest, TaskResult, TaskStatus, TaskStatusView

PENDING_APPROVAL_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.05
# A query sent while the task is between runs (continue-as-new) or its workflow task is in flight
# may go unanswered on the time-skipping server; ask again rather than wait forever.
QUERY_RPC_TIMEOUT = timedelta(seconds=10)

T = TypeVar("T")

Handle = WorkflowHandle[AgentTaskWorkflow, TaskResult]


def eventually(check: Callable[[], T], what: str, within: float = 30.0, *, interval: float = 0.5) -> T:
    """Call `check` every `interval` seconds until it returns something truthy, and return
    that; fail naming `what` once `within` seconds have passed. For tests without an event
    loop (a subprocess, a server in a thread)."""
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:g}s waiting for {what}")
        time.sleep(interval)


async def eventually_async(
    check: Callable[[], Awaitable[T]] | Callable[[], T],
    what: str,
    within: float = 30.0,
    *,
    interval: float = POLL_INTERVAL_S,
) -> T:
    """`eventually` in an event loop: `check` may be a coroutine function, and the loop runs
    on between tries."""
    deadline = time.monotonic() + within
    while True:
        found = check()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return found  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:g}s waiting for {what}")
        await asyncio.sleep(interval)


async def pending_approval(
    handle: WorkflowHandle[Any, Any],
    *,
    within: float = PENDING_APPROVAL_TIMEOUT_S,
    while_status: Collection[TaskStatus] | None = None,
) -> ApprovalRequest:
    """The request the task waits on, once it has one.

    `while_status`, when given, lists the statuses the task may pass through on the way; any
    other (it finished, or failed) fails the test at once instead of at the deadline.
    """
    deadline = time.monotonic() + within
    while True:
        try:
            status = await handle.query(AgentTaskWorkflow.status, rpc_timeout=QUERY_RPC_TIMEOUT)
        except RPCError as err:
            # A loaded machine may answer a query late: ask again, within the same deadline.
            late = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)  # "Timeout expired"
            if err.status not in late or time.monotonic() > deadline:
                raise
            continue
        if status.pending_approval is not None:
            return status.pending_approval
        if while_status is not None:
            assert status.status in while_status, status
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{handle.id} never asked for approval within {within:g}s "
                f"(status {status.status.value}, last action {status.last_action!r})"
            )
        await asyncio.sleep(POLL_INTERVAL_S)


async def approve_when_pending(
    handle: WorkflowHandle[Any, Any], approver: str = "cli:local"
) -> ApprovalRequest:
    """Wait for the task's approval request and approve it as `approver`; the request."""
    pending = await pending_approval(handle)
    await handle.signal(
        AgentTaskWorkflow.approve, ApprovalDecision(pending.request_id, pending.action_id, approver)
    )
    return pending


async def status_when(
    handle: WorkflowHandle[Any, Any], ready: Callable[[TaskStatusView], bool], within: float = 30.0
) -> TaskStatusView:
    """The task's status, once `ready` holds for it."""
    deadline = time.monotonic() + within
    while True:
        status = await handle.query(AgentTaskWorkflow.status)
        if ready(status):
            return status
        assert time.monotonic() < deadline, f"{handle.id}: {status.last_action!r}"
        await asyncio.sleep(0.05)
