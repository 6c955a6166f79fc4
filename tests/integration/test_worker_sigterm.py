"""Two production worker processes (`python -m workers.run`) on one dev server and one
Postgres: SIGTERM the one holding a running task, and the task finishes on the other, with
its tool run exactly once.

The task is the real AgentTaskWorkflow on the offline model: "remember that ..." makes it
call memory.save, which the agent gates behind an approval, so the task parks mid-way in
the worker's cache. We stop that worker, approve, and count what was written. It runs
unversioned and with worker deployment versioning (both workers on one build, promoted with
`openloop promote`, the task pinned to that build).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType, VersioningBehavior
from temporalio.client import Client, WorkflowHandle

from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.loader import parse_agent
from config.settings import Settings
from surfaces.tasks import start_task
from tests.helpers import pending_approval
from workers.embedded import TemporalDevServer
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, SurfaceContext, TaskResult, TaskStatus

STARTUP_TIMEOUT_S = 90.0  # two cold Python processes importing LiteLLM on a busy machine
GRACE_SECONDS = 10

AGENT_YAML = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {{name: {name}, workspace: default}}
spec:
  memory: {{scope: channel}}
  model_policy: {{default: offline/demo}}
  tools:
    - {{name: memory.save, permissions: ["memory:write"]}}
  approvals:
    require_for: [memory.save]
    approvers: ["cli:test"]
    ttl: 72h
"""


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    ready_file: Path
    log_file: Path

    @property
    def identity_prefix(self) -> str:
        return f"{self.process.pid}@"  # the SDK's default identity is pid@host

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")


def _worker_env(dev_server: TemporalDevServer, pg_url: str, task_queue: str, tmp: Path) -> dict[str, str]:
    # No provider keys and no stray OpenLoop settings from the developer's shell.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_") and "_API_KEY" not in k}
    env.update(
        OPENLOOP_TEMPORAL_ADDRESS=dev_server.address,
        OPENLOOP_DATABASE_URL=pg_url,
        OPENLOOP_TASK_QUEUE=task_queue,
        OPENLOOP_STATE_DIR=str(tmp / "state"),
        OPENLOOP_SHUTDOWN_GRACE_SECONDS=str(GRACE_SECONDS),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    return env


def _start_worker(name: str, env: dict[str, str], tmp: Path) -> WorkerProcess:
    ready = tmp / name / "ready"
    log_file = tmp / f"{name}.log"
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "workers.run"],
            env={**env, "OPENLOOP_READY_FILE": str(ready)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return WorkerProcess(name, process, ready, log_file)


async def _wait_ready(workers: list[WorkerProcess]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not all(w.ready_file.exists() for w in workers):
        for w in workers:
            assert w.process.poll() is None, f"worker {w.name} exited:\n{w.log()}"
        assert time.monotonic() < deadline, "workers not ready:\n" + "\n".join(w.log() for w in workers)
        await asyncio.sleep(0.2)


def _stop(worker: WorkerProcess) -> None:
    if worker.process.poll() is None:
        worker.process.send_signal(signal.SIGTERM)
        try:
            worker.process.wait(GRACE_SECONDS + 20)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait(5)


async def _identities(handle: WorkflowHandle[AgentTaskWorkflow, TaskResult], kind: int) -> list[str]:
    """The worker identity on every history event of `kind`, in order."""
    identities = []
    async for event in handle.fetch_history_events():
        if event.event_type == kind:
            if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                identities.append(event.workflow_task_completed_event_attributes.identity)
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                identities.append(event.activity_task_started_event_attributes.identity)
    return identities


async def _count(pg_url: str, sql: str, *params: object) -> int:
    pool = await get_pool(pg_url)
    async with pool.connection() as conn:
        cursor = await conn.execute(sql, params)
        row = await cursor.fetchone()
    assert row is not None
    return int(row["count"])  # type: ignore[call-overload]  # the pool returns dict rows


def _promote(env: dict[str, str], deployment: str, build_id: str) -> None:
    command = ["promote", build_id, "--deployment", deployment, "--wait", "60"]
    result = subprocess.run(
        [sys.executable, "-m", "surfaces.cli.main", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("versioned", [False, True], ids=["unversioned", "build-id"])
async def test_sigterm_hands_a_running_task_to_the_other_worker_nothing_lost_or_doubled(
    client: Client,
    dev_server: TemporalDevServer,
    pg_url: str,
    task_queue: str,
    tmp_path: Path,
    versioned: bool,
) -> None:
    env = _worker_env(dev_server, pg_url, task_queue, tmp_path)
    build_id, deployment = f"b-{uuid.uuid4().hex[:6]}", f"openloop-{uuid.uuid4().hex[:6]}"
    if versioned:
        env.update(OPENLOOP_BUILD_ID=build_id, OPENLOOP_DEPLOYMENT_NAME=deployment)
    workers = [_start_worker("a", env, tmp_path), _start_worker("b", env, tmp_path)]
    try:
        await _wait_ready(workers)
        if versioned:
            _promote(env, deployment, build_id)  # versioned workers get no tasks until then
        agent_name = f"sigterm-{uuid.uuid4().hex[:8]}"
        stored, _ = await apply_agent(await get_pool(pg_url), parse_agent(AGENT_YAML.format(name=agent_name)))
        settings = Settings(database_url=pg_url, temporal_address=dev_server.address, task_queue=task_queue)
        task_id = f"task-cli-{uuid.uuid4().hex[:12]}"
        handle, started = await start_task(
            client,
            settings,
            stored,
            SurfaceContext(surface="cli", channel="general", user="cli:test"),
            "remember that we chose Postgres 16",
            task_id=task_id,
        )
        assert started
        pending = await pending_approval(
            handle, while_status=(TaskStatus.RUNNING, TaskStatus.WAITING_APPROVAL)
        )
        request_id, action_id = pending.request_id, pending.action_id
        if versioned:
            info = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
            assert info.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
            assert (info.deployment_version.deployment_name, info.deployment_version.build_id) == (
                deployment,
                build_id,
            )

        # The task is parked in the cache of the worker that ran its last workflow task.
        last = (await _identities(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED))[-1]
        holder = next(w for w in workers if last.startswith(w.identity_prefix))
        survivor = next(w for w in workers if w is not holder)

        stopped_at = time.monotonic()
        holder.process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(holder.process.wait, GRACE_SECONDS + 20)
        assert code == 0, holder.log()
        assert time.monotonic() - stopped_at < GRACE_SECONDS + 10
        assert "worker stopped cleanly" in holder.log()
        assert not holder.ready_file.exists(), "a stopping worker must not report ready"
        assert survivor.process.poll() is None and survivor.ready_file.exists()

        await handle.signal(AgentTaskWorkflow.approve, ApprovalDecision(request_id, action_id, "cli:test"))
        result = await asyncio.wait_for(handle.result(), timeout=60)

        assert result.status == TaskStatus.SUCCESS, result
        # Everything after the stop ran on the survivor.
        tasks_after = (await _identities(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED))[-1]
        assert tasks_after.startswith(survivor.identity_prefix)
        activities = await _identities(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED)
        assert activities[-1].startswith(survivor.identity_prefix)
        # The approved tool ran exactly once: one memory, one tool audit row.
        memories = await _count(pg_url, "SELECT count(*) FROM memories WHERE source_task_id = %s", task_id)
        tool_calls = await _count(
            pg_url,
            "SELECT count(*) FROM audit_log"
            " WHERE task_id = %s AND kind = 'tool_call' AND tool = 'memory.save' AND outcome = 'ok'",
            task_id,
        )
        assert (memories, tool_calls) == (1, 1)
    finally:
        for worker in workers:
            _stop(worker)
