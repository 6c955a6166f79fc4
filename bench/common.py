"""Shared pieces of the agent-runtime benches: the embedded stack (Temporal dev server,
PostgreSQL + pgvector, a fake GitHub), the bench agents, workers in this process or as child
processes, percentiles, tables and the JSON results.

Run from the repository root: the fake GitHub comes from `tests/fakes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from activities import github_client
from activities import runtime as activity_runtime
from activities.agent_store import StoredAgent, apply_agent
from activities.db import apply_migrations_async, close_pools, get_pool
from bench.scripted import BENCH_REPO, ISSUES, FloorWorkflow, Plan, noop, scripted_model
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.client import connect
from surfaces.tasks import start_task, task_id_for
from tests.fakes.github_api import FakeGitHub
from workers.embedded import EmbeddedPostgres, TemporalDevServer, free_port, stop_process
from workers.worker import ACTIVITIES, MAX_CACHED_WORKFLOWS, build_worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskResult

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).parent / "results"
GITHUB_TOKEN = "ghp_bench"
APPROVER = "cli:bench"
ISSUE_BODY_CHARS = 3000  # a long-ish issue, under the tool's own bound


@dataclass
class Stack:
    """Where the benches run: settings (DB, Temporal, GitHub), a client, the agents."""

    settings: Settings
    client: Client
    github: FakeGitHub
    agents: dict[str, StoredAgent] = field(default_factory=dict)


def bench_agent(name: str, *, approvals: bool = False) -> AgentConfig:
    """An agent with the memory tools and github.get_issue, limits wide enough for long tasks."""
    spec: dict[str, Any] = {
        "model_policy": {"default": "offline/demo"},
        "tools": [
            {"name": "memory.search", "permissions": ["memory:read"]},
            {"name": "memory.save", "permissions": ["memory:write"]},
            {"name": "github.get_issue", "permissions": ["issues:read"]},
        ],
        "limits": {"max_iterations": 1000, "token_limit": 10**9, "wall_clock": "12h"},
        "budget": {"per_task_usd": 100.0},
    }
    if approvals:
        spec["approvals"] = {"require_for": ["memory.save"], "approvers": [APPROVER]}
    return AgentConfig.model_validate(
        {"apiVersion": "openloop.ai/v1alpha1", "kind": "Agent", "metadata": {"name": name}, "spec": spec}
    )


def seed_github(fake: FakeGitHub) -> None:
    fake.add_repo(BENCH_REPO)
    for number in range(1, ISSUES + 1):
        body = " ".join(f"line {i} of the report for issue {number}: the deploy failed." for i in range(80))
        fake.add_issue(BENCH_REPO, f"Flaky deploy {number}", body[:ISSUE_BODY_CHARS])
        for c in range(3):
            fake.add_comment(BENCH_REPO, number, f"Comment {c}: seen again on run {100 + c}, retry passed.")


async def prepare(settings: Settings, client: Client, github: FakeGitHub) -> Stack:
    """Point the activities at `settings`, seed GitHub, store the bench agents."""
    github_client.reset_clients()
    activity_runtime.configure(settings)
    seed_github(github)
    pool = await get_pool(settings.require_database_url())
    stack = Stack(settings, client, github)
    for name, approvals in (("bench", False), ("bench-approvals", True)):
        stack.agents[name], _ = await apply_agent(pool, bench_agent(name, approvals=approvals))
    return stack


@contextlib.asynccontextmanager
async def embedded_stack() -> AsyncIterator[Stack]:
    """A fresh dev server (in memory), Postgres and fake GitHub in a temp dir, for one run."""
    with tempfile.TemporaryDirectory(prefix="olb") as tmp:  # short: the pg socket lives here
        temporal = TemporalDevServer(
            port=free_port(), ui_port=None, db_file=None, log_file=Path(tmp) / "temporal.log"
        )
        postgres = EmbeddedPostgres(Path(tmp) / "pg")
        github = FakeGitHub(token=GITHUB_TOKEN).start()
        try:
            temporal.start()
            url = postgres.start()
            temporal.wait_healthy()
            await apply_migrations_async(url)
            settings = Settings(
                database_url=url, temporal_address=temporal.address, state_dir=Path(tmp) / "state",
                github_api_url=github.url, github_token=SecretStr(GITHUB_TOKEN),
            )
            yield await prepare(settings, await connect(settings), github)
        finally:
            await close_pools()
            github.stop()
            postgres.stop()
            temporal.stop()


def new_queue(kind: str) -> str:
    return f"bench-{kind}-{uuid.uuid4().hex[:8]}"


def floor_queue(queue: str) -> str:
    return f"{queue}-floor"


def agent_activities() -> list[Any]:
    """The worker's real activities, with the scripted model in place of the model call."""
    return [scripted_model if a.__name__ == "call_model" else a for a in ACTIVITIES]


def bench_workers(
    client: Client, settings: Settings, queue: str, *, max_cached_workflows: int = MAX_CACHED_WORKFLOWS
) -> list[Worker]:
    """The real worker (build_worker) with the scripted model, and the floor workflow's worker
    built from the very same config on its own queue."""
    agent = build_worker(
        client, settings, queue, activities=agent_activities(), max_cached_workflows=max_cached_workflows
    )
    config: dict[str, Any] = dict(agent.config())
    config.update(task_queue=floor_queue(queue), workflows=[FloorWorkflow], activities=[noop])
    return [agent, Worker(**config)]


@contextlib.asynccontextmanager
async def running(workers: Sequence[Worker]) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as exits:
        for worker in workers:
            await exits.enter_async_context(worker)
        yield


async def start_agent_task(
    stack: Stack, queue: str, plan: Plan, event_id: str, agent: str = "bench"
) -> WorkflowHandle[AgentTaskWorkflow, TaskResult]:
    """Start a task the way a surface does (`surfaces.tasks.start_task`), on `queue`."""
    context = SurfaceContext(surface="cli", channel="bench", user=APPROVER, event_id=event_id)
    settings = stack.settings.model_copy(update={"task_queue": queue})
    handle, _ = await start_task(
        stack.client, settings, stack.agents[agent], context, plan.request(),
        task_id=task_id_for("cli", event_id),
    )
    return handle


# Worker processes ---------------------------------------------------------------------------


def spawn_worker(settings: Settings, queue: str, max_cached: int = MAX_CACHED_WORKFLOWS) -> subprocess.Popen[str]:
    """`python -m bench worker` on `queue`; returns once it polls."""
    env = {
        **os.environ,
        "OPENLOOP_TEMPORAL_ADDRESS": settings.temporal_address,
        "OPENLOOP_DATABASE_URL": settings.require_database_url(),
        "OPENLOOP_TASK_QUEUE": queue,
        "OPENLOOP_STATE_DIR": str(settings.state_dir),
        "GITHUB_API_URL": settings.github_api_url,
        "GITHUB_TOKEN": GITHUB_TOKEN,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "worker", "--max-cached", str(max_cached)],
        env=env, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT, start_new_session=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if line != "ready":
        stop_process(process)
        raise RuntimeError(f"the bench worker did not start (said {line!r})")
    return process


async def serve_worker(max_cached: int) -> None:
    """The child process: bench workers on OPENLOOP_TASK_QUEUE until SIGTERM."""
    settings = Settings.from_env()
    client = await connect(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    workers = bench_workers(client, settings, settings.task_queue, max_cached_workflows=max_cached)
    async with running(workers):
        print("ready", flush=True)
        await stop.wait()
    await close_pools()


def rss_mb(pid: int) -> float:
    """Resident memory of a process, from /proc/PID/status (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# Figures ------------------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


def stats(values: Sequence[float], digits: int = 2) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(pct(values, 0.50), digits),
        "p95": round(pct(values, 0.95), digits),
        "mean": round(sum(values) / len(values), digits) if values else float("nan"),
        "max": round(max(values), digits) if values else float("nan"),
    }


def deltas_ms(starts: Sequence[float]) -> list[float]:
    return [(b - a) * 1000 for a, b in zip(starts, starts[1:], strict=False)]


def machine() -> dict[str, Any]:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    return {
        "cpus": os.cpu_count(), "cpu_model": model, "mem_gb": round(int(mem) / 1024**2, 1),
        "python": platform.python_version(), "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def write_result(name: str, report: dict[str, Any], directory: Path = RESULTS_DIR) -> Path:
    report = {**report, "machine": machine(), "measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (also readable as plain text)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    line = lambda row: "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells[1:])])


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"

