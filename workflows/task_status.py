"""A task's `status` query answer: where it stands, what it spends, what it waits on.

Workflow code: deterministic, no I/O. While children of the task wait for approvals, the
last action names them (which child, which tool, whose approval), so a parent that only
waits on its tree says what the tree waits on.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.types import TaskStatusView

from workflows.approvals import ApprovalGate
from workflows.delegation import Delegation
from workflows.task_record import TaskRecord
from workflows.usage_meter import UsageMeter


def status_view(
    task_id: str,
    record: TaskRecord,
    meter: UsageMeter,
    gate: ApprovalGate,
    children: Delegation,
    reply: str,
) -> TaskStatusView:
    return TaskStatusView(
        task_id=task_id,
        agent=children.inp.agent.name,
        status=record.status,
        step=record.step,
        last_action=children.waiting_line() or record.last_action,
        usage=meter.usage,
        limits=meter.ceilings.as_dict(),
        pending_approval=gate.pending,
        reply=reply,
    )
