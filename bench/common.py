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
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from activities import runtime as activity_runtime
from activities.github import client as github_client
from activities.store.agents import StoredAgent, apply_agent
from activities.store.db import apply_migrations_async, close_pools, get_pool
from bench.scripted import BENCH_REPO, ISSUES, FloorWorkflow, Plan, noop, scripted_model
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.client import connect
from surfaces.tasks import start_task, task_id_for
from tests.fakes.github_api import FakeGitHub
from workers.embedded import EmbeddedPostgres, TemporalDevServer, free_port, stop_process
from workers.worker import ACTIVITIES, build_worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskResult

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).parent / "results"
GITHUB_TOKEN = "ghp_bench"
APPROVER = "cli:bench"
ISSUE_BODY_CHARS = 3000
WORKER_WARNINGS: dict[
    int, int
] = {}  # warning lines each worker process logged, by pid  # a long-ish issue, under the tool's own bound


@dataclass
class Stack:
    """Where the benches run: settings (DB, Temporal, GitHub), a client, the agents."""

    settings: Settings
    client: Client
    github: FakeGitHub
    agents: dict[str, StoredAgent] = field(default_factory=dict)
    server_pids: dict[str, int] = field(default_factory=dict)  # temporal, postgres (postmaster)


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
    # The fake writes headers and body in two sends; with Nagle on, each answer then waits
    # for the client's delayed ACK (~40 ms). A tool that fast would be noise here, not GitHub.
    github._server.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[attr-defined]
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
                database_url=url,
                temporal_address=temporal.address,
                state_dir=Path(tmp) / "state",
                github_api_url=github.url,
                github_token=SecretStr(GITHUB_TOKEN),
            )
            stack = await prepare(settings, await connect(settings), github)
            assert temporal.process is not None
            postmaster = int((Path(tmp) / "pg" / "postmaster.pid").read_text().split()[0])
            stack.server_pids = {"temporal": temporal.process.pid, "postgres": postmaster}
            yield stack
        finally:
            await close_pools()
            github.stop()
            postgres.stop()
            temporal.stop()


def log(message: str) -> None:
    """Progress on stderr, so a long run shows it is alive; results go to stdout and JSON."""
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def new_queue(kind: str) -> str:
    return f"bench-{kind}-{uuid.uuid4().hex[:8]}"


def floor_queue(queue: str) -> str:
    return f"{queue}-floor"


def agent_activities() -> list[Any]:
    """The worker's real activities, with the scripted model in place of the model call."""
    return [scripted_model if a.__name__ == "call_model" else a for a in ACTIVITIES]


def bench_workers(client: Client, settings: Settings, queue: str, **options: int) -> list[Worker]:
    """The real worker (build_worker, `options` as its keyword arguments) with the scripted
    model, and the floor workflow's worker built from the very same config on its own queue."""
    agent = build_worker(client, settings, queue, activities=agent_activities(), **options)
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
        stack.client,
        settings,
        stack.agents[agent],
        context,
        plan.request(),
        task_id=task_id_for("cli", event_id),
    )
    return handle


# Worker processes ---------------------------------------------------------------------------


def spawn_worker(settings: Settings, queue: str, **options: int) -> subprocess.Popen[str]:
    """`python -m bench worker` on `queue` (`options`: build_worker's keyword arguments);
    returns once it polls."""
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
        [sys.executable, "-m", "bench", "worker", "--worker-options", json.dumps(options)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    assert process.stdout is not None
    said = []
    while (line := process.stdout.readline()) and line.strip() != "ready":
        said.append(line)
    if not line:
        stop_process(process)
        raise RuntimeError("the bench worker did not start:\n" + "".join(said[-20:]))
    # Keep draining its output: a worker whose stdout pipe fills up blocks on its next log line.
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    log_file = settings.state_dir / f"worker-{queue}-{process.pid}.log"
    threading.Thread(target=_drain, args=(process, log_file), daemon=True).start()
    return process


def _drain(process: subprocess.Popen[str], log_file: Path) -> None:
    assert process.stdout is not None
    with log_file.open("w") as out:
        for line in process.stdout:
            out.write(line)
            if "WARN" in line or "Warning" in line:
                WORKER_WARNINGS[process.pid] = WORKER_WARNINGS.get(process.pid, 0) + 1


async def serve_worker(options: dict[str, int]) -> None:
    """The child process: bench workers on OPENLOOP_TASK_QUEUE until SIGTERM."""
    settings = Settings.from_env()
    client = await connect(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    workers = bench_workers(client, settings, settings.task_queue, **options)
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


def _proc_cpu(pid: int, children: bool = False) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_seconds(stack: Stack, workers: Sequence[int]) -> dict[str, float]:
    """CPU seconds used so far by the worker processes, the dev server, PostgreSQL (the
    postmaster, its reaped children and its live backends) and this bench process."""
    postmaster = stack.server_pids.get("postgres")
    backends = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            if postmaster and int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                backends.append(int(stat.parent.name))
    usage = {"workers": sum(_proc_cpu(pid) for pid in workers), "bench_client": _proc_cpu(os.getpid())}
    if "temporal" in stack.server_pids:
        usage["temporal_server"] = _proc_cpu(stack.server_pids["temporal"])
    if postmaster:
        total = _proc_cpu(postmaster, children=True)
        for pid in backends:
            with contextlib.suppress(OSError):
                total += _proc_cpu(pid)
        usage["postgres"] = total
    return usage


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
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "mem_gb": round(int(mem) / 1024**2, 1),
        "python": platform.python_version(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def write_result(name: str, report: dict[str, Any], directory: Path = RESULTS_DIR) -> Path:
    report = {**report, "machine": machine(), "measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path
