"""`poll=` sensors: a Temporal Schedule each, firing `PlaybookSensorPollWorkflow`, and the
activity that calls the sensor.

`reconcile_sensor_polls` runs with `openloop playbooks apply`, like the cron schedules: a
schedule per poll sensor (every `poll` interval, overlaps skipped), updated when its interval,
event, folder or task queue changed, deleted when the sensor is gone. The activity imports the
sensor from the playbooks folder the schedule names (it must exist on the worker too), calls
it (with no argument, or the poll's time if it takes one), and starts the playbooks listening
for its event.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from temporalio import activity
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from activities.playbooks.schedules import Reconciled, current_signature, schedule_gone
from activities.playbooks.sensor_code import load_sensors
from activities.playbooks.starts import start_listening
from activities.runtime import runtime
from workflows.errors import ErrorType
from workflows.playbook_calls import Published, SensorPoll
from workflows.playbook_sensor_poll import POLL_ACTIVITY, SENSOR_POLL_WORKFLOW_NAME

POLL_PREFIX = "openloop-sensor-"
SIGNATURE_MEMO = "openloop_sensor_signature"


def poll_schedule_id(ref: str) -> str:
    return POLL_PREFIX + ref.replace(":", "-")


def _signature(poll: SensorPoll, seconds: float, task_queue: str) -> str:
    return f"{poll.ref}|{poll.emits}|{poll.folder}|{seconds}|{task_queue}"


def _schedule(poll: SensorPoll, seconds: float, task_queue: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            SENSOR_POLL_WORKFLOW_NAME,
            poll,
            id=poll_schedule_id(poll.ref),  # Temporal appends each firing's time
            task_queue=task_queue,
            memo={SIGNATURE_MEMO: _signature(poll, seconds, task_queue)},
            static_summary=f"poll sensor {poll.ref} for {poll.emits}",
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=seconds))]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def reconcile_sensor_polls(
    client: Client, polls: Sequence[tuple[SensorPoll, float]], task_queue: str
) -> Reconciled:
    """Make the poll schedules match `polls` (each sensor and its interval in seconds)."""
    done = Reconciled()
    wanted = {poll_schedule_id(poll.ref): (poll, seconds) for poll, seconds in polls}
    for sid, (poll, seconds) in sorted(wanted.items()):
        schedule = _schedule(poll, seconds, task_queue)
        current = await current_signature(client, sid, SIGNATURE_MEMO)
        if current is None:
            await client.create_schedule(sid, schedule)
            done.created.append(poll.ref)
        elif current == _signature(poll, seconds, task_queue):
            done.unchanged.append(poll.ref)
        else:

            def replace(previous: ScheduleUpdateInput, schedule: Schedule = schedule) -> ScheduleUpdate:
                schedule.state = previous.description.schedule.state  # paused stays paused
                return ScheduleUpdate(schedule=schedule)

            await client.get_schedule_handle(sid).update(replace)
            done.updated.append(poll.ref)
    async for listed in await client.list_schedules():
        if listed.id.startswith(POLL_PREFIX) and listed.id not in wanted:
            try:
                await client.get_schedule_handle(listed.id).delete()
            except RPCError as err:
                if not schedule_gone(err):
                    raise
                continue
            done.deleted.append(listed.id[len(POLL_PREFIX) :])
    return done


@activity.defn(name=POLL_ACTIVITY)
async def poll_sensor(poll: SensorPoll) -> Published:
    sensors, problems = load_sensors(Path(poll.folder))
    found = next((sensor for sensor in sensors if sensor.ref == poll.ref), None)
    if found is None:
        why = "; ".join(problems) or f"no @sensor {poll.ref} in {poll.folder}/sensors"
        raise ApplicationError(why, type=ErrorType.SENSOR_ERROR, non_retryable=True)
    # A webhook sensor takes the request; a poll sensor may take the poll's time, or nothing.
    takes_argument = bool(inspect.signature(found.function).parameters)
    argument = ({"polled_at": poll.run_key.rsplit("@", 1)[-1]},) if takes_argument else ()
    try:
        fields = await found.event(*argument)
    except Exception as exc:  # the sensor's own failure: retried a little, then the next firing
        raise ApplicationError(f"sensor {poll.ref} failed: {type(exc).__name__}: {exc}") from exc
    if fields is None:
        return Published(refused="the sensor made no event")
    started = await start_listening(
        activity.client(),
        await runtime().pool(),
        activity.info().task_queue,
        poll.emits,
        fields,
        poll.run_key,
    )
    return Published(started=started.started, duplicates=started.duplicates)
