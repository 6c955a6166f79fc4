"""Retention: the purge workflow on the time-skipping server with the real purge activity and
real Postgres, and the daily Temporal Schedule on the dev server (created idempotently,
updated in place, and purging when it fires)."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client, ScheduleActionStartWorkflow, ScheduleHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.store.db import get_pool
from activities.store.memory import list_memories, remember
from activities.store.store_activities import purge_expired_memories
from config.agent import OFFLINE_EMBEDDING
from config.settings import Settings
from workers.schedules import ensure_retention_schedule
from workflows.retention import (
    RETENTION_WORKFLOW_NAME,
    MemoryRetentionWorkflow,
    PurgeInput,
    PurgeResult,
)
from workflows.types import MemoryScopeRef


async def seed(pool: AsyncConnectionPool, stale: int) -> tuple[str, str]:
    """`stale` memories past their one-day retention and one fresh one; (workspace, fresh id)."""
    ws = f"ret-{uuid.uuid4().hex[:8]}"
    scope = MemoryScopeRef(ws, "helper", "channel", "slack:CRET", OFFLINE_EMBEDDING, 1)
    old = datetime.now(UTC) - timedelta(days=3)
    for n in range(stale):
        await remember(pool, scope, f"stale decision {n}", "t", n, f"{ws}:{n}", created_at=old)
    fresh, _ = await remember(pool, scope, "fresh decision", "t", 99, f"{ws}:fresh")
    return ws, fresh


async def remaining(pool: AsyncConnectionPool, ws: str) -> list[str]:
    return [m.id for m in await list_memories(pool, workspace=ws, include_expired=True)]


async def test_the_workflow_purges_expired_memories_in_batches(
    ts_env: WorkflowEnvironment, task_queue: str, db_settings: Settings
) -> None:
    pool = await get_pool(db_settings.require_database_url())
    ws, fresh = await seed(pool, stale=3)
    async with Worker(
        ts_env.client,
        task_queue=task_queue,
        workflows=[MemoryRetentionWorkflow],
        activities=[purge_expired_memories],
    ):
        capped = await ts_env.client.execute_workflow(
            MemoryRetentionWorkflow.run,
            PurgeInput(batch_size=1, max_batches=2),
            id=f"ret-{uuid.uuid4().hex}",
            task_queue=task_queue,
        )
        assert capped == PurgeResult(deleted=2, batches=2, finished=False)
        done = await ts_env.client.execute_workflow(
            MemoryRetentionWorkflow.run,
            PurgeInput(batch_size=1),
            id=f"ret-{uuid.uuid4().hex}",
            task_queue=task_queue,
        )
    assert done.finished and done.deleted >= 1 and done.batches == done.deleted + 1
    assert await remaining(pool, ws) == [fresh]


async def test_the_daily_schedule_is_idempotent_keeps_a_pause_and_purges(
    client: Client, task_queue: str, db_settings: Settings
) -> None:
    schedule_id = f"retention-{uuid.uuid4().hex[:8]}"
    assert await ensure_retention_schedule(client, "old-queue", schedule_id) == schedule_id
    assert await ensure_retention_schedule(client, "old-queue", schedule_id) == schedule_id
    handle = client.get_schedule_handle(schedule_id)
    try:
        await handle.pause(note="maintenance window")
        # The pause is a signal to the scheduler; an operator's pause lands long before a redeploy.
        await _until_paused(handle)
        # A redeploy on another task queue updates the schedule in place, keeping the pause.
        await ensure_retention_schedule(client, task_queue, schedule_id)
        described = await handle.describe()
        [calendar] = described.schedule.spec.calendars
        assert [(r.start, r.end) for r in calendar.hour] == [(3, 3)]
        assert [(r.start, r.end) for r in calendar.minute] == [(17, 17)]
        assert [(r.start, r.end) for r in calendar.day_of_month] == [(1, 31)]  # every day
        action = described.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        assert action.workflow == RETENTION_WORKFLOW_NAME and action.task_queue == task_queue
        assert described.schedule.state.paused
        assert described.schedule.state.note == "maintenance window"
        await handle.unpause()

        pool = await get_pool(db_settings.require_database_url())
        ws, fresh = await seed(pool, stale=2)
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[MemoryRetentionWorkflow],
            activities=[purge_expired_memories],
        ):
            await handle.trigger()
            workflow_id = await _first_run(handle)
            result = await client.get_workflow_handle(workflow_id, result_type=PurgeResult).result()
        assert result.finished and result.deleted >= 2
        assert await remaining(pool, ws) == [fresh]
    finally:
        await handle.delete()


# The scheduler applies a pause or a trigger asynchronously, and on a loaded machine that can
# take well over ten seconds: wait by the clock, not by a number of tries.
SCHEDULE_TIMEOUT_S = 60.0


async def _until_paused(handle: ScheduleHandle) -> None:
    deadline = time.monotonic() + SCHEDULE_TIMEOUT_S
    while not (await handle.describe()).schedule.state.paused:
        if time.monotonic() > deadline:
            raise AssertionError(f"the schedule never showed the pause within {SCHEDULE_TIMEOUT_S:g}s")
        await asyncio.sleep(0.1)


async def _first_run(handle: ScheduleHandle) -> str:
    deadline = time.monotonic() + SCHEDULE_TIMEOUT_S
    while not (actions := (await handle.describe()).info.recent_actions):
        if time.monotonic() > deadline:
            raise AssertionError(f"the schedule never started a run within {SCHEDULE_TIMEOUT_S:g}s")
        await asyncio.sleep(0.1)
    return str(actions[0].action.workflow_id)
