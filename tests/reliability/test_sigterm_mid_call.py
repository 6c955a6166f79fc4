"""Two workers; the one running a model call gets SIGTERM while the model is still answering.
It stops taking work, lets the call finish within its grace period, reports it and exits 0;
the other worker finishes the task. The model is asked once and the call is charged once.
(The same with a task parked on an approval is tests/integration/test_worker_sigterm.py.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.client import Client

from tests.fakes.model_api import FakeModelAPI
from tests.helpers import eventually_async
from tests.reliability.harness import (
    FAKE_OPENAI_KEY,
    WorkerForker,
    agent_config,
    scalar,
    start,
    stored,
    worker_env,
)
from workers.embedded import TemporalDevServer
from workflows.types import TaskStatus

ANSWER_DELAY_SECONDS = 3.0  # well inside the 10 s grace period


async def test_sigterm_during_a_model_call_finishes_the_call_and_hands_over_the_task(
    client: Client,
    dev_server: TemporalDevServer,
    pg_url: str,
    task_queue: str,
    tmp_path: Path,
    forker: WorkerForker,
) -> None:
    fake = FakeModelAPI().start()
    fake.answer("Tuesdays.", delay=ANSWER_DELAY_SECONDS)
    env = worker_env(
        dev_server.address,
        pg_url,
        task_queue,
        tmp_path,
        OPENLOOP_MODEL_API_BASE=fake.base_url,
        OPENAI_API_KEY=FAKE_OPENAI_KEY,
    )
    workers = [await forker.spawn("a", env, tmp_path), await forker.spawn("b", env, tmp_path)]
    try:
        await asyncio.gather(*(w.ready() for w in workers))
        agent = await stored(pg_url, agent_config())
        handle = await start(client, task_queue, agent, "Which day do we deploy?")
        await eventually_async(lambda: len(fake.requests) == 1, "the model request to arrive", 60)
        pending = (await handle.describe()).raw_description.pending_activities
        assert len(pending) == 1
        holder_pid = int(pending[0].last_worker_identity.split("@")[0])
        holder = next(w for w in workers if w.pid == holder_pid)
        survivor = next(w for w in workers if w is not holder)

        code = await holder.terminate()
        assert code == 0, holder.log()
        assert "worker stopped cleanly" in holder.log()
        result = await asyncio.wait_for(handle.result(), 60)
        assert survivor.alive()
    finally:
        for worker in workers:
            await worker.kill()
        fake.stop()

    assert result.status == TaskStatus.SUCCESS and result.reply == "Tuesdays."
    assert len(fake.requests) == 1  # the call in flight finished; nothing asked twice
    ledger = "SELECT count(*) FROM usage_ledger WHERE task_id = %s"
    assert await scalar(pg_url, ledger, handle.id) == 1
    history = await handle.fetch_history()
    completions = [e for e in history.events if e.HasField("workflow_task_completed_event_attributes")]
    last = completions[-1].workflow_task_completed_event_attributes.identity
    assert last.startswith(f"{survivor.pid}@")  # the task ended on the other worker
