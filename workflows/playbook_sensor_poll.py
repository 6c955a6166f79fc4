"""One firing of a `poll=` sensor: call it once, and start the playbooks listening for the
event it makes (if it makes one).

Each poll sensor has a Temporal Schedule (`activities.playbooks.sensor_polls`) whose action
starts this workflow every `poll` interval; the sensor's code runs in an activity on the
worker, never here. The run key of the runs it starts is the sensor and the firing's time,
so a retried poll never starts a run twice. Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import SENSOR_POLL_RETRY, SENSOR_POLL_TIMEOUT
    from workflows.playbook_calls import Published, SensorPoll

from workflows.playbook_run import SCHEDULED_START

SENSOR_POLL_WORKFLOW_NAME = "openloop.PlaybookSensorPoll"
POLL_ACTIVITY = "openloop.playbook.poll_sensor"


@workflow.defn(name=SENSOR_POLL_WORKFLOW_NAME)
class PlaybookSensorPollWorkflow:
    @workflow.run
    async def run(self, inp: SensorPoll) -> Published:
        due = workflow.info().typed_search_attributes.get(SCHEDULED_START)
        key = due.isoformat() if due is not None else workflow.info().workflow_id
        poll = inp.model_copy(update={"run_key": f"{inp.ref}@{key}"})
        published: Published = await workflow.execute_activity(
            POLL_ACTIVITY,
            poll,
            result_type=Published,
            summary=f"poll {inp.ref}",
            start_to_close_timeout=SENSOR_POLL_TIMEOUT,
            retry_policy=SENSOR_POLL_RETRY,
        )
        return published
