"""Shared set-up of the reliability suite: agents, tasks, database counts, waits, and worker
processes that a test kills (SIGKILL) or stops (SIGTERM) at the moment it chooses.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from activities.agent_store import StoredAgent, apply_agent
from activities.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.tasks import start_task
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskResult

REPO = Path(__file__).resolve().parents[2]
MODEL = "openai/gpt-4o-mini"  # priced in LiteLLM's local cost map
# A provider key that must never leave the worker's environment (see test_secrets).
FAKE_OPENAI_KEY = "sk-reliability-" + "0a1b2c3d" * 4
WORKER_START_TIMEOUT_S = 90.0  # a cold Python process importing LiteLLM on a busy machine

Handle = WorkflowHandle[AgentTaskWorkflow, TaskResult]


def agent_config(name: str | None = None, **spec: Any) -> AgentConfig:
    """An agent on the priced model, with `spec` merged in."""
    return AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name or f"rel-{uuid.uuid4().hex[:8]}"},
            "spec": {"model_policy": {"default": MODEL, "max_output_tokens": 256}, **spec},
        }
    )


async def stored(pg_url: str, config: AgentConfig) -> StoredAgent:
    agent, _ = await apply_agent(await get_pool(pg_url), config)
    return agent


async def start(
    client: Client,
    task_queue: str,
    agent: StoredAgent,
    request: str,
    *,
    channel: str | None = None,
    surface: str = "cli",
    user: str = "cli:test",
) -> Handle:
    context = SurfaceContext(surface=surface, channel=channel or f"ch-{uuid.uuid4().hex[:8]}", user=user)
    settings = Settings(task_queue=task_queue)
    handle, started = await start_task(
        client, settings, agent, context, request, task_id=f"task-rel-{uuid.uuid4().hex[:16]}"
    )
    assert started
    return handle


async def scalar(pg_url: str, sql: str, *params: object) -> Any:
    """The first column of the first row (the pool returns dict rows)."""
    pool = await get_pool(pg_url)
    async with pool.connection() as conn:
        row = await (await conn.execute(sql, params)).fetchone()  # type: ignore[arg-type]
    return None if row is None else next(iter(row.values()))


async def eventually(
    check: Callable[[], Awaitable[bool]] | Callable[[], bool], what: str, timeout: float = 30.0
) -> None:
    """Poll `check` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = check()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.05)


# Worker processes ------------------------------------------------------------------------


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[str]
    ready_file: Path
    log_file: Path

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    async def warm(self) -> None:
        """Wait until the process has loaded LiteLLM (it prints `warm`)."""
        assert self.process.stdout is not None
        line = await asyncio.wait_for(
            asyncio.to_thread(self.process.stdout.readline), WORKER_START_TIMEOUT_S
        )
        assert line.strip() == "warm", f"worker {self.name} did not warm up:\n{self.log()}"

    async def go(self) -> None:
        """Let a standby worker start polling, and wait until it does."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        await self.ready()

    async def ready(self) -> None:
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while not self.ready_file.exists():
            assert self.process.poll() is None, f"worker {self.name} exited:\n{self.log()}"
            assert time.monotonic() < deadline, f"worker {self.name} not ready:\n{self.log()}"
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to finish or report anything."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            raise AssertionError(f"worker {self.name} ignored SIGTERM:\n{self.log()}") from None


def worker_env(
    temporal_address: str, pg_url: str, task_queue: str, tmp: Path, **extra: str
) -> dict[str, str]:
    """The environment of a worker process; no stray settings or keys from the shell."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_") and "_API_KEY" not in k}
    env.update(
        OPENLOOP_TEMPORAL_ADDRESS=temporal_address,
        OPENLOOP_DATABASE_URL=pg_url,
        OPENLOOP_TASK_QUEUE=task_queue,
        OPENLOOP_STATE_DIR=str(tmp / "state"),
        OPENLOOP_SHUTDOWN_GRACE_SECONDS="10",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONPATH=str(REPO),
        **extra,
    )
    return env


def spawn(name: str, env: dict[str, str], tmp: Path, *, standby: bool = False) -> WorkerProcess:
    """Start `tests.reliability.crash_worker`; a standby one polls only after `go()`."""
    ready = tmp / name / "ready"
    log_file = tmp / f"{name}.log"
    with log_file.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.crash_worker"],
            env={
                **env,
                "OPENLOOP_READY_FILE": str(ready),
                "RELIABILITY_WAIT_FOR_GO": "1" if standby else "0",
            },
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=REPO,
        )
    return WorkerProcess(name, process, ready, log_file)
