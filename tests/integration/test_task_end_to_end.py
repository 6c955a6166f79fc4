"""A task end to end on the real dev server and real Postgres, with the offline model and the
real activities: recall, approval, the tool, usage and audit rows, the reply — and a worker
killed between the model call and the tool call."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
from temporalio.client import Client, WorkflowHandle

from activities.store.agents import StoredAgent, apply_agent
from activities.store.db import get_pool
from config.loader import example_agent
from config.settings import Settings
from surfaces.tasks import start_task, task_id_for
from tests.helpers import approve_when_pending, pending_approval
from workers.worker import build_worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskResult, TaskStatus

DECISION = "Please remember the decision: we chose Postgres 16 for the usage ledger."


async def helper_agent(settings: Settings) -> StoredAgent:
    pool = await get_pool(settings.require_database_url())
    stored, _ = await apply_agent(pool, example_agent("minimal"))
    return stored


async def start(
    client: Client, settings: Settings, agent: StoredAgent, text: str, channel: str
) -> WorkflowHandle[AgentTaskWorkflow, TaskResult]:
    context = SurfaceContext(surface="cli", channel=channel, user="cli:local", event_id=uuid.uuid4().hex)
    handle, started = await start_task(
        client, settings, agent, context, text, task_id=task_id_for("cli", context.event_id or "")
    )
    assert started
    return handle


def count(url: str, sql: str, *params: object) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row else 0


async def test_remember_with_approval_then_recall_in_the_same_channel_only(
    client: Client, settings: Settings, task_queue: str
) -> None:
    settings = settings.model_copy(update={"task_queue": task_queue})
    agent = await helper_agent(settings)
    channel = f"ch-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, settings):
        handle = await start(client, settings, agent, DECISION, channel)
        assert (await approve_when_pending(handle)).tool == "memory.save"
        result = await handle.result()
        assert result.status == TaskStatus.SUCCESS, result.reason
        assert result.reply.startswith("[offline model]")
        assert "Saved to channel memory" in result.reply and "Postgres 16" in result.reply

        url = settings.require_database_url()
        assert count(url, "SELECT count(*) FROM memories WHERE scope_key = %s", f"cli:{channel}") == 1
        assert count(url, "SELECT count(*) FROM usage_ledger WHERE task_id = %s", handle.id) == result.steps
        assert count(url, "SELECT count(*) FROM transcript WHERE task_id = %s", handle.id) >= 4
        assert (
            count(
                url,
                "SELECT count(*) FROM audit_log WHERE task_id = %s AND kind = 'approval_approved'",
                handle.id,
            )
            == 1
        )

        later = await start(client, settings, agent, "What did we decide about the ledger?", channel)
        assert "Postgres 16" in (await later.result()).reply
        elsewhere = await start(
            client, settings, agent, "What did we decide about the ledger?", channel + "-other"
        )
        assert "Postgres 16" not in (await elsewhere.result()).reply


async def test_history_grows_linearly_with_steps(client: Client, settings: Settings, task_queue: str) -> None:
    """Each step adds about the same number of history bytes: no transcript rides in history."""
    settings = settings.model_copy(update={"task_queue": task_queue})
    agent = await helper_agent(settings)
    async with build_worker(client, settings):
        handle = await start(client, settings, agent, "hello there", f"ch-{uuid.uuid4().hex[:8]}")
        result = await handle.result()
    history = await handle.fetch_history()
    size = len(history.to_json())
    # One model step for a plain answer: the whole history stays small.
    assert result.steps == 1
    assert size < 40_000, size


WORKER_SCRIPT = """
import asyncio, sys
from config.settings import Settings
from surfaces.client import connect
from workers.worker import build_worker

async def main():
    settings = Settings.from_env()
    client = await connect(settings)
    async with build_worker(client, settings):
        print("ready", flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


def spawn_worker(settings: Settings, tmp: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "OPENLOOP_TEMPORAL_ADDRESS": settings.temporal_address,
        "OPENLOOP_DATABASE_URL": settings.require_database_url(),
        "OPENLOOP_TASK_QUEUE": settings.task_queue,
        "OPENLOOP_STATE_DIR": str(tmp),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


async def test_worker_killed_between_model_call_and_tool_call(
    client: Client, settings: Settings, task_queue: str, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"task_queue": task_queue})
    agent = await helper_agent(settings)
    channel = f"ch-{uuid.uuid4().hex[:8]}"
    first = spawn_worker(settings, tmp_path)
    try:
        handle = await start(client, settings, agent, DECISION, channel)
        await pending_approval(handle)  # the model has answered and the task waits before the tool
    finally:
        first.kill()  # SIGKILL: no chance to finish anything
        first.wait()
    second = spawn_worker(settings, tmp_path)
    try:
        await approve_when_pending(handle)
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        second.kill()
        second.wait()
    assert result.status == TaskStatus.SUCCESS
    url = settings.require_database_url()
    assert count(url, "SELECT count(*) FROM memories WHERE scope_key = %s", f"cli:{channel}") == 1
    assert (
        count(
            url,
            "SELECT count(*) FROM audit_log WHERE task_id = %s AND kind = 'tool_call'",
            handle.id,
        )
        == 1
    )
