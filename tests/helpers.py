"""Waiting on a running task from a test: poll its `status` query until it asks for approval.

The workflow answers `status` from its own state, so a test that needs the pending request
(its id, its action, its approvers) polls here rather than guessing how long the model and
the policy take. The deadline is wall-clock time, not a number of tries, so a loaded machine
gets the same patience as an idle one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, ApprovalRequest, TaskStatus

PENDING_APPROVAL_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.05


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
            status = await handle.query(AgentTaskWorkflow.status)
        except RPCError as err:
            # A loaded machine may answer a query late: ask again, within the same deadline.
            if err.status != RPCStatusCode.DEADLINE_EXCEEDED or time.monotonic() > deadline:
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
