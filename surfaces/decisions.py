"""How every surface delivers a person's decision to a task, and hears whether it counted.

A Slack click, the dashboard's Approve/Deny, `openloop approve|deny|extend` and the CLI's
prompt all call `decide`: one `openloop.task.decide` update (`workflows.decisions`). Its
validator applies the task's own rule to its own state (`workflows.approval_rule`, with the
ids the approvers resolved to), so there is nothing to check here first: the verdict says
whether it counted, or why not. A refused decision never reaches the task's history; its
verdict carries the audit row the task built, and it is recorded here, so every refused
decision is audited with its reason (kinds `approval_refused`, `budget_extension_refused`).

Also here: how a closed request reads, and a task's status as a list shows it.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.store.db import get_pool
from activities.store.ledger import write_audit
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import DECISION_REFUSED, AuditEvent, Decision, DecisionVerdict

log = logging.getLogger("openloop.surfaces")

# A worker answers an update in well under a second; waiting longer means none is running.
DECIDE_WAIT = timedelta(seconds=5)

# What the caller's verdict says when the task could not judge (besides the rule's cases).
NO_TASK = "no_task"
FINISHED = "finished"
NO_ANSWER = "no_answer"
FAILED = "failed"  # the task could not take the decision at all (a worker without the update)

# How a closed request reads after "This approval request …".
_CLOSED = {
    "closed": "was already decided or has expired",
    "mismatch": "is for different arguments than the pending action",
    "expired": "has expired",
    NO_TASK: "belongs to a task that no longer exists",
    FINISHED: "is for a task that has already finished",
}
_VERDICT: TypeAdapter[DecisionVerdict] = TypeAdapter(DecisionVerdict)


async def decide(
    handle: WorkflowHandle[Any, Any], database_url: str | None, decision: Decision
) -> DecisionVerdict:
    """Send `decision` to the task of `handle`; its verdict, a refusal audited (in the database
    at `database_url`). Raises `RPCError` only when Temporal cannot be reached."""
    try:
        verdict = await handle.execute_update(AgentTaskWorkflow.decide, decision, rpc_timeout=DECIDE_WAIT)
    except WorkflowUpdateFailedError as err:
        verdict = _refused(err.cause)
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        # The update may still be taken when a worker runs and the task then judges it as ever,
        # but nobody waits for that verdict: a refusal then is not audited.
        reason = f"the task did not answer within {DECIDE_WAIT.seconds} s (is a worker running?)"
        return DecisionVerdict(False, reason, NO_ANSWER)
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        return await _closed(handle)
    if not verdict.counted and verdict.audit is not None:
        await _record(database_url, verdict.audit)
    return verdict


def closed_reason(problem: str) -> str:
    """A refusal other than "not an approver", as "This approval request {reason}" ends."""
    return _CLOSED.get(problem, "could not be decided")


def _refused(cause: BaseException | None) -> DecisionVerdict:
    if isinstance(cause, ApplicationError) and cause.type == DECISION_REFUSED and cause.details:
        return _VERDICT.validate_python(cause.details[0])
    # Not the rule's refusal (a worker without the update, say): nothing to audit, say why.
    return DecisionVerdict(False, str(cause) if cause is not None else "refused", FAILED)


async def _closed(handle: WorkflowHandle[Any, Any]) -> DecisionVerdict:
    """The update found no running task: none by that id, or it already finished."""
    try:
        await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return DecisionVerdict(False, f"there is no task {handle.id}", NO_TASK)
        raise
    return DecisionVerdict(False, "the task has already finished", FINISHED)


async def _record(database_url: str | None, event: AuditEvent) -> None:
    """Write a refusal's audit row; the person still hears the verdict if this fails."""
    if not database_url:
        log.warning("refused decision on %s not audited: no database configured", event.task_id)
        return
    try:
        pool = await get_pool(database_url)
        async with pool.connection() as conn:
            await write_audit(conn, event)
    except Exception:  # the verdict stands; the log says which refusal went unrecorded
        log.exception("refused decision on %s by %s not audited", event.task_id, event.approver)


def status_of(execution: Any) -> str:
    """The OpenLoop status, unless Temporal ended the run some other way (terminated...)."""
    recorded = execution.typed_search_attributes.get(search.STATUS)
    temporal = execution.status
    if temporal not in (
        None,
        WorkflowExecutionStatus.RUNNING,
        WorkflowExecutionStatus.COMPLETED,
        WorkflowExecutionStatus.CONTINUED_AS_NEW,
    ):
        return temporal.name if temporal else "UNKNOWN"  # terminated, timed out: no result
    return str(recorded) if recorded else (temporal.name if temporal else "UNKNOWN")
