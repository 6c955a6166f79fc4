"""Temporal Schedules OpenLoop keeps in place: the daily memory-retention purge.

`ensure_retention_schedule` is safe to call at every worker start: it creates the schedule,
or updates an existing one to the current spec and task queue, so redeploys never leave a
second schedule or an old task queue behind.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleCalendarSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from workflows.retention import MemoryRetentionWorkflow, PurgeInput

RETENTION_SCHEDULE_ID = "openloop-memory-retention"
# Daily at 03:17 UTC: off the hour, when the schedules of many systems pile up.
RETENTION_HOUR_UTC = 3
RETENTION_MINUTE = 17
RETENTION_RUN_TIMEOUT = timedelta(hours=1)
# A purge that missed its time (server down) still runs if it is less than a day late.
RETENTION_CATCHUP_WINDOW = timedelta(days=1)


def retention_schedule(task_queue: str, schedule_id: str = RETENTION_SCHEDULE_ID) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            MemoryRetentionWorkflow.run,
            PurgeInput(),
            id=schedule_id,  # Temporal appends each run's time to the workflow id
            task_queue=task_queue,
            execution_timeout=RETENTION_RUN_TIMEOUT,
        ),
        spec=ScheduleSpec(
            calendars=[
                ScheduleCalendarSpec(
                    hour=[ScheduleRange(RETENTION_HOUR_UTC)],
                    minute=[ScheduleRange(RETENTION_MINUTE)],
                    comment="daily memory retention purge",
                )
            ]
        ),
        policy=SchedulePolicy(
            overlap=ScheduleOverlapPolicy.SKIP,  # one purge at a time is enough
            catchup_window=RETENTION_CATCHUP_WINDOW,
        ),
    )


async def ensure_retention_schedule(
    client: Client, task_queue: str, schedule_id: str = RETENTION_SCHEDULE_ID
) -> str:
    """Create the daily retention schedule, or bring an existing one up to date; its id."""
    schedule = retention_schedule(task_queue, schedule_id)
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:
        handle = client.get_schedule_handle(schedule_id)

        def replace(current: ScheduleUpdateInput) -> ScheduleUpdate:
            # Keep what an operator set (paused, a note); replace the spec and the action.
            schedule.state = current.description.schedule.state
            return ScheduleUpdate(schedule=schedule)

        await handle.update(replace)
    return schedule_id
