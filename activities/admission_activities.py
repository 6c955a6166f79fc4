"""Enter and leave an agent's admission line, and check which slot holders still run.

Enter and leave are updates-with-start on the agent's `openloop.AgentAdmission` workflow
(the first task of an agent starts it). Their update ids derive from the task id, so a
retried activity is answered by the server from the first call's result.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from workflows.admission_types import (
    AdmissionCall,
    AdmissionInput,
    EnterRequest,
    EnterResult,
    LeaveRequest,
    admission_workflow_id,
)
from workflows.agent_admission import AgentAdmissionWorkflow
from workflows.task_basics import ActivityName


def _start(call: AdmissionCall) -> WithStartWorkflowOperation[AgentAdmissionWorkflow, None]:
    return WithStartWorkflowOperation(
        AgentAdmissionWorkflow.run,
        AdmissionInput(workspace=call.workspace, agent=call.agent),
        id=admission_workflow_id(call.workspace, call.agent),
        task_queue=activity.info().task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


@activity.defn(name=ActivityName.ADMISSION_ENTER)
async def enter_admission(call: AdmissionCall) -> EnterResult:
    result: EnterResult = await activity.client().execute_update_with_start_workflow(
        AgentAdmissionWorkflow.enter,
        EnterRequest(call.task_id, call.limits),
        start_workflow_operation=_start(call),
        id=f"enter:{call.task_id}",
    )
    return result


@activity.defn(name=ActivityName.ADMISSION_LEAVE)
async def leave_admission(call: AdmissionCall) -> None:
    await activity.client().execute_update_with_start_workflow(
        AgentAdmissionWorkflow.leave,
        LeaveRequest(call.task_id),
        start_workflow_operation=_start(call),
        id=f"leave:{call.task_id}",
    )


async def _still_running(client: Client, task_id: str) -> bool:
    try:
        described = await client.get_workflow_handle(task_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return described.status == WorkflowExecutionStatus.RUNNING


@activity.defn(name=ActivityName.ADMISSION_STILL_RUNNING)
async def admission_still_running(task_ids: list[str]) -> list[str]:
    """The task ids among `task_ids` whose workflows still run (the others hold a slot in vain)."""
    client = activity.client()
    return [task_id for task_id in task_ids if await _still_running(client, task_id)]


ADMISSION_ACTIVITIES = (enter_admission, leave_admission, admission_still_running)
