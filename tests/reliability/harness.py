"""Shared set-up of the reliability suite: agents, tasks, database counts, waits, and worker
processes that a test kills (SIGKILL) or stops (SIGTERM) at the moment it chooses.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from activities.store.agents import StoredAgent, apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.tasks import start_task
from tests.helpers import eventually_async
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
    task_id: str | None = None,
) -> Handle:
    context = SurfaceContext(surface=surface, channel=channel or f"ch-{uuid.uuid4().hex[:8]}", user=user)
    settings = Settings(task_queue=task_queue)
    handle, started = await start_task(
        client, settings, agent, context, request, task_id=task_id or new_task_id()
    )
    assert started
    return handle


def new_task_id() -> str:
    return f"task-rel-{uuid.uuid4().hex[:16]}"


async def scalar(pg_url: str, sql: str, *params: object) -> Any:
    """The first column of the first row (the pool returns dict rows)."""
    pool = await get_pool(pg_url)
    async with pool.connection() as conn:
        row: Any = await (await conn.execute(sql, params)).fetchone()  # type: ignore[arg-type]
    return None if row is None else next(iter(row.values()))


# Worker processes ------------------------------------------------------------------------


@dataclass
class WorkerProcess:
    """A worker process forked by `WorkerForker`: killed, stopped and watched by pid."""

    name: str
    pid: int
    ready_file: Path
    log_file: Path

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def exit_code(self) -> int | None:
        done = self.log_file.with_name(self.log_file.name + ".exit")
        return int(done.read_text()) if done.exists() else None

    async def ready(self) -> None:
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while not self.ready_file.exists():
            assert self.alive(), f"worker {self.name} exited:\n{self.log()}"
            assert time.monotonic() < deadline, f"worker {self.name} not ready:\n{self.log()}"
            await asyncio.sleep(0.05)

    async def gone(self, within: float = 30.0) -> None:
        await eventually_async(lambda: not self.alive(), f"worker {self.name} to exit", within)

    async def kill(self) -> None:
        """SIGKILL: the process gets no chance to finish or report anything."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        await self.gone()

    async def terminate(self, within: float = 30.0) -> int | None:
        """SIGTERM, wait for the exit, and return the exit code the worker recorded."""
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
        await self.gone(within)
        return self.exit_code()


class WorkerForker:
    """The warm parent of the worker processes (`tests.reliability.crash_worker`)."""

    def __init__(self, tmp: Path) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_") and "_API_KEY" not in k}
        base.update(LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(REPO))
        self.log_file = tmp / "forker.log"
        with self.log_file.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.reliability.crash_worker"],
                env=base,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=REPO,
            )

    async def _line(self) -> str:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.process.stdout.readline), WORKER_START_TIMEOUT_S)
        assert line, f"the worker parent exited:\n{self.log_file.read_text(errors='replace')}"
        return line.strip()

    async def warm(self) -> WorkerForker:
        assert await self._line() == "warm"
        return self

    async def spawn(self, name: str, env: dict[str, str], tmp: Path) -> WorkerProcess:
        """Fork a worker with `env`; it polls as soon as it has connected."""
        ready, log_file = tmp / name / "ready", tmp / f"{name}.log"
        assert self.process.stdin is not None
        request = {"env": {**env, "OPENLOOP_READY_FILE": str(ready)}, "log": str(log_file)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return WorkerProcess(name, int(await self._line()), ready, log_file)

    def close(self) -> None:
        self.process.kill()
        self.process.wait(10)


def worker_env(
    temporal_address: str, pg_url: str, task_queue: str, tmp: Path, **extra: str
) -> dict[str, str]:
    """The settings of a worker process (its parent has no OpenLoop settings or keys)."""
    return {
        "OPENLOOP_TEMPORAL_ADDRESS": temporal_address,
        "OPENLOOP_DATABASE_URL": pg_url,
        "OPENLOOP_TASK_QUEUE": task_queue,
        "OPENLOOP_STATE_DIR": str(tmp / "state"),
        "OPENLOOP_SHUTDOWN_GRACE_SECONDS": "10",
        **extra,
    }


# Faults injected in Postgres -------------------------------------------------------------

# A row in `rel_faults` makes the next writes of one task to one table misbehave:
# `hold` sleeps inside the writing transaction (so a test can kill its backend there),
# `fail` raises, as if the process had died just before that write.
FAULTS_SQL = """
CREATE TABLE IF NOT EXISTS rel_faults (
    task_id text NOT NULL, tbl text NOT NULL, kind text NOT NULL, PRIMARY KEY (task_id, tbl));
CREATE OR REPLACE FUNCTION rel_fault() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    task text := coalesce(to_jsonb(NEW)->>'task_id', to_jsonb(NEW)->>'source_task_id');
    fault text;
BEGIN
    SELECT kind INTO fault FROM rel_faults WHERE task_id = task AND tbl = TG_TABLE_NAME;
    IF fault = 'hold' THEN
        PERFORM pg_sleep(60);
    ELSIF fault = 'fail' THEN
        RAISE EXCEPTION 'injected fault: no % row for %', TG_TABLE_NAME, task;
    END IF;
    RETURN NEW;
END $$;
"""
FAULT_TABLES = ("usage_ledger", "audit_log", "memories", "transcript")


def install_faults(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(4242)")
        conn.execute(FAULTS_SQL)  # type: ignore[arg-type]
        for table in FAULT_TABLES:
            conn.execute(f"DROP TRIGGER IF EXISTS rel_fault ON {table}")  # type: ignore[arg-type]
            conn.execute(
                f"CREATE TRIGGER rel_fault BEFORE INSERT ON {table}"  # type: ignore[arg-type]
                " FOR EACH ROW EXECUTE FUNCTION rel_fault()"
            )


async def set_fault(pg_url: str, task_id: str, table: str, kind: str | None) -> None:
    """Arm (`hold` or `fail`) or clear (None) the fault for one task's writes to `table`."""
    pool = await get_pool(pg_url)
    async with pool.connection() as conn:
        await conn.execute("DELETE FROM rel_faults WHERE task_id = %s AND tbl = %s", (task_id, table))
        if kind is not None:
            await conn.execute("INSERT INTO rel_faults VALUES (%s, %s, %s)", (task_id, table, kind))


async def held_backend(pg_url: str, table: str) -> int | None:
    """The pid of a backend sleeping in a `hold` fault while inserting into `table`."""
    return await scalar(  # type: ignore[no-any-return]
        pg_url,
        "SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query ILIKE %s",
        f"%INSERT INTO {table}%",
    )
