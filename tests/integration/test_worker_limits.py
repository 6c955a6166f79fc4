"""Worker slots follow the sticky cache, so a small cache cannot thrash under a burst."""

from __future__ import annotations

import uuid

from temporalio.client import Client

from config.settings import Settings
from workers.worker import build_worker


def slots(client: Client, settings: Settings, **limits: int) -> int:
    worker = build_worker(client, settings, f"limits-{uuid.uuid4().hex[:8]}", **limits)
    return int(worker.config()["max_concurrent_workflow_tasks"] or 0)


async def test_workflow_task_slots_stay_within_a_fifth_of_the_sticky_cache(
    client: Client, db_settings: Settings
) -> None:
    assert slots(client, db_settings) == 100  # the defaults: 100 slots for 1,000 cached
    assert slots(client, db_settings, max_cached_workflows=100) == 20
    assert slots(client, db_settings, max_cached_workflows=100, max_concurrent_workflow_tasks=8) == 8
    assert slots(client, db_settings, max_cached_workflows=5) == 2  # never below two
