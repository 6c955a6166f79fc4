"""Postgres failing under a running task, with the real activities and the real model
activity talking to a fake provider through LiteLLM.

- The backend writing a model answer is terminated (pg_terminate_backend) inside its
  transaction: the answer and its usage row roll back together, the activity's retry
  writes them once, and the task finishes.
- The database restarts while the model is answering: every pooled connection dies with
  it; the task still finishes, with one answer and one usage row.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from pgserver._commands import pg_ctl  # type: ignore[attr-defined]
from temporalio.client import Client

from activities.store.db import apply_migrations, get_pool
from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI
from tests.helpers import eventually_async
from tests.reliability.harness import (
    agent_config,
    held_backend,
    install_faults,
    new_task_id,
    scalar,
    set_fault,
    start,
    stored,
)
from workers.embedded import EmbeddedPostgres
from workers.worker import build_worker
from workflows.types import TaskStatus

ANSWERS = "SELECT count(*) FROM transcript WHERE task_id = %s AND role = 'assistant'"
USAGE = "SELECT count(*) FROM usage_ledger WHERE task_id = %s"


async def test_a_backend_terminated_mid_transaction_rolls_back_and_the_retry_writes_once(
    client: Client, settings: Settings, task_queue: str, model: FakeModelAPI
) -> None:
    url = settings.require_database_url()
    install_faults(url)
    agent = await stored(url, agent_config())
    task_id = new_task_id()
    model.answer("An answer that never commits.")
    model.answer("The answer that commits.", delay=1.0)  # time to look at the rolled-back state
    await set_fault(url, task_id, "usage_ledger", "hold")
    try:
        async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
            handle = await start(client, task_queue, agent, "Which day do we deploy?", task_id=task_id)
            pids: list[int] = []

            async def holding() -> bool:
                pid = await held_backend(url, "usage_ledger")
                pids.extend([pid] if pid else [])
                return pid is not None

            await eventually_async(holding, "the answer's transaction to reach the usage row", 60)
            await set_fault(url, task_id, "usage_ledger", None)  # the retry is not held
            assert await scalar(url, "SELECT pg_terminate_backend(%s)", pids[0]) is True

            async def gone() -> bool:
                return not await scalar(url, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pids[0])

            await eventually_async(gone, "the terminated backend to exit")
            # Rolled back together: neither the stored answer nor its usage row is there.
            assert (await scalar(url, ANSWERS, task_id), await scalar(url, USAGE, task_id)) == (0, 0)
            result = await asyncio.wait_for(handle.result(), 60)
    finally:
        await set_fault(url, task_id, "usage_ledger", None)

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert result.reply == "The answer that commits."
    assert (await scalar(url, ANSWERS, task_id), await scalar(url, USAGE, task_id)) == (1, 1)
    assert len(model.requests) == 2  # the rolled-back answer was asked for again


async def test_postgres_restarted_while_the_model_answers_the_task_still_finishes(
    client: Client, tmp_path: Path, task_queue: str, model: FakeModelAPI
) -> None:
    postgres = EmbeddedPostgres(tmp_path / "pg")  # its own server: the others keep theirs
    url = postgres.start()
    try:
        apply_migrations(url)
        settings = Settings(database_url=url, task_queue=task_queue, state_dir=tmp_path / "state")
        agent = await stored(url, agent_config())
        model.answer("Tuesdays.", delay=2.0)
        model.answer("Tuesdays, asked again.")
        model.answer("Tuesdays, asked a third time.")
        async with build_worker(client, settings):
            handle = await start(client, task_queue, agent, "Which day do we deploy?")
            await eventually_async(lambda: len(model.requests) == 1, "the model request", 60)
            server = postgres.server
            await asyncio.to_thread(
                pg_ctl,
                ["restart", "-m", "fast", "-w"],
                pgdata=server.pgdata,
                user=server.system_user,
                timeout=60,
            )
            result = await asyncio.wait_for(handle.result(), 60)
        assert result.status == TaskStatus.SUCCESS, result.reason
        assert (await scalar(url, ANSWERS, handle.id), await scalar(url, USAGE, handle.id)) == (1, 1)
        # The answer that was in flight is the one stored: a restart costs no second call.
        assert result.reply == "Tuesdays." and len(model.requests) == 1
    finally:
        pool = await get_pool(url)
        await pool.close()
        pgdata, user = postgres.server.pgdata, postgres.server.system_user
        postgres.stop()
        # The restarted server is not the process pgserver started, so pgserver's cleanup
        # leaves it running: stop it by its data directory.
        with contextlib.suppress(Exception):
            pg_ctl(["stop", "-m", "immediate", "-w"], pgdata=pgdata, user=user, timeout=30)
