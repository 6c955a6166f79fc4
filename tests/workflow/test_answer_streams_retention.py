"""The daily retention run prunes the Slack answer streams no model call can look for anymore
(older than a day), and keeps a recent one its call's retries may still need. The retention
workflow on the time-skipping server with the real purge activity and real Postgres."""

from __future__ import annotations

import uuid

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities import runtime as activity_runtime
from activities.store import answer_streams
from activities.store.db import get_pool
from activities.store.store_activities import purge_expired_memories
from config.settings import Settings
from workflows.retention import MemoryRetentionWorkflow, PurgeInput


async def test_the_retention_run_prunes_old_answer_streams_and_keeps_recent_ones(
    ts_env: WorkflowEnvironment, task_queue: str, db_settings: Settings
) -> None:
    activity_runtime.configure(db_settings)
    pool = await get_pool(db_settings.require_database_url())
    finished, running = f"task-slack-{uuid.uuid4().hex[:8]}", f"task-slack-{uuid.uuid4().hex[:8]}"
    await answer_streams.started(pool, finished, 3, "C0STREAM", "1700000000.000100")
    await answer_streams.started(pool, running, 1, "C0STREAM", "1700000000.000200")
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE answer_streams SET started_at = now() - interval '2 days' WHERE task_id = %s",
            (finished,),
        )
    async with Worker(
        ts_env.client,
        task_queue=task_queue,
        workflows=[MemoryRetentionWorkflow],
        activities=[purge_expired_memories],
    ):
        await ts_env.client.execute_workflow(
            MemoryRetentionWorkflow.run, PurgeInput(), id=f"ret-{uuid.uuid4().hex}", task_queue=task_queue
        )
    assert await answer_streams.of_step(pool, finished, 3) == []
    assert await answer_streams.of_step(pool, running, 1) == [("C0STREAM", "1700000000.000200")]
