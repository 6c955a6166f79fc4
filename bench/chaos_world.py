"""The chaos run's world: the stack as production runs it, every part a process the driver
can stop — PostgreSQL (pgserver), the Temporal dev server on a database file, two agent
workers and a loop worker (`openloop worker`, `openloop worker --loops`) — and the outside
world in this process: a model that answers each task from its own conversation (so answers
do not depend on which task asks first), a fake GitHub with its git host, an MCP server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client

from activities.playbooks.apply import apply_playbooks
from activities.store.agents import StoredAgent, apply_agent
from activities.store.db import apply_migrations_async, close_pools, get_pool
from bench.chaos_plans import LOOP, PYTEST, SLOW_LOOP, chaos_agent, chaos_playbooks, loop_file, respond
from config.settings import Settings
from surfaces.client import connect
from tests.fakes.git_http import FakeGitHost
from tests.fakes.github_api import FakeGitHub
from tests.fakes.model_api import FakeModelAPI
from tests.fakes.slack_api import FakeSlack
from workers.embedded import EmbeddedPostgres, TemporalDevServer, free_port
from workers.setup import register_search_attributes
from workflows.playbook_types import EventType

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO = REPO_ROOT / "config" / "loops" / "demo-project"
REPO = "acme/chaos"
TOKEN = "ghp_chaos_0123456789abcdef"
GRACE_SECONDS = 10
WORKER_START_S = 120.0  # a cold worker imports LiteLLM; on a busy 2-core machine, slowly
WORKERS = ("agents-1", "agents-2", "loops-1")


@dataclass
class WorkerProc:
    name: str
    loops: bool
    process: subprocess.Popen[bytes]
    ready_file: Path
    started: float = field(default_factory=time.monotonic)

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class ChaosWorld:
    root: Path
    postgres: EmbeddedPostgres
    temporal: TemporalDevServer
    model: FakeModelAPI
    github: FakeGitHub
    git: FakeGitHost
    slack: FakeSlack
    settings: Settings
    client: Client
    agent: StoredAgent
    workers: dict[str, WorkerProc] = field(default_factory=dict)
    restarts: int = 0
    threads: dict[str, str] = field(default_factory=dict)  # a Slack-surface run's thread
    left_running: list[str] = field(default_factory=list)  # workers whose stop left processes

    # Worker processes ----------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_") and "_API_KEY" not in k}
        return {
            **keep,
            "PYTHONPATH": str(REPO_ROOT),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
            "OPENLOOP_TEMPORAL_ADDRESS": self.settings.temporal_address,
            "OPENLOOP_DATABASE_URL": self.settings.require_database_url(),
            "OPENLOOP_TASK_QUEUE": self.settings.task_queue,
            "OPENLOOP_LOOP_TASK_QUEUE": self.settings.loop_task_queue,
            "OPENLOOP_STATE_DIR": str(self.root / "state"),
            "OPENLOOP_WORKSPACES_DIR": str(self.root / "workspaces"),
            "OPENLOOP_LOOPS_DIR": str(self.settings.loops_dir),
            "OPENLOOP_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
            "OPENLOOP_MODEL_API_BASE": self.model.base_url,
            "OPENAI_API_KEY": "sk-chaos",
            "GITHUB_TOKEN": TOKEN,
            "GITHUB_API_URL": self.github.url,
            "GITHUB_GIT_URL": self.git.url,
            "SLACK_BOT_TOKEN": self.slack.token,
            "OPENLOOP_SLACK_API_URL": self.slack.base_url,
        }

    def spawn(self, name: str) -> WorkerProc:
        loops = name.startswith("loops")
        self.restarts += name in self.workers
        ready = self.root / "ready" / f"{name}-{time.monotonic_ns()}"
        log = (self.root / "logs" / f"{name}.log").open("ab")
        command = [str(Path(sys.executable).with_name("openloop")), "worker", *(["--loops"] if loops else [])]
        process = subprocess.Popen(
            command,
            env={**self._environment(), "OPENLOOP_READY_FILE": str(ready)},
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            start_new_session=True,
        )
        self.workers[name] = WorkerProc(name, loops, process, ready)
        return self.workers[name]

    async def ready(self, worker: WorkerProc) -> None:
        deadline = time.monotonic() + WORKER_START_S
        while not worker.ready_file.exists():
            if not worker.alive():
                raise RuntimeError(f"worker {worker.name} exited {worker.process.returncode}: see logs/")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {worker.name} not ready after {WORKER_START_S:.0f}s")
            await asyncio.sleep(0.1)

    async def stop_worker(self, name: str, how: signal.Signals) -> float:
        """Stop the worker as its platform would; the seconds until it exited. SIGTERM goes to
        the worker alone (a deploy: Kubernetes signals the container's main process) and
        whatever it leaves running is killed after it exits, as the container's end kills
        it; SIGKILL takes the whole process group at once (a crash, an OOM kill)."""
        worker = self.workers[name]
        began = time.monotonic()
        if worker.alive():
            if how == signal.SIGTERM:
                os.kill(worker.process.pid, signal.SIGTERM)
            else:
                os.killpg(worker.process.pid, signal.SIGKILL)
        await asyncio.to_thread(worker.process.wait, GRACE_SECONDS + 30)
        if _group_alive(worker.process.pid):  # what a graceful stop should have stopped itself
            if how == signal.SIGTERM:
                self.left_running.append(name)
            os.killpg(worker.process.pid, signal.SIGKILL)
        return time.monotonic() - began

    async def stop_all(self) -> None:
        for worker in self.workers.values():
            if worker.alive():
                os.killpg(worker.process.pid, signal.SIGKILL)
                await asyncio.to_thread(worker.process.wait, 30)

    # The servers ---------------------------------------------------------------------------

    async def restart_postgres(self) -> None:
        await asyncio.to_thread(self.postgres.stop)
        await asyncio.to_thread(self.postgres.start)

    async def restart_temporal(self) -> None:
        await asyncio.to_thread(self.temporal.stop)
        await asyncio.to_thread(self.temporal.start)
        await asyncio.to_thread(self.temporal.wait_healthy, 60)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@asynccontextmanager
async def chaos_world(root: Path, name: str):  # type: ignore[no-untyped-def]
    """Every part started, the agent applied, the workers ready; all stopped at the end."""
    for folder in ("logs", "ready", "loops", "mcp"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    postgres = EmbeddedPostgres(root / "pg")
    url = await asyncio.to_thread(postgres.start)
    temporal = TemporalDevServer(
        port=free_port(), ui_port=None, db_file=root / "temporal.db", log_file=root / "logs" / "temporal.log"
    )
    async with AsyncExitStack() as stack:
        stack.callback(postgres.stop)
        temporal.start()
        stack.callback(temporal.stop)
        await asyncio.to_thread(temporal.wait_healthy, 60)
        await apply_migrations_async(url)
        stack.push_async_callback(close_pools)
        model = FakeModelAPI().start()
        stack.callback(model.stop)
        git = FakeGitHost(root / "git", token=TOKEN).start()
        stack.callback(git.stop)
        github = FakeGitHub(token=TOKEN).start()
        stack.callback(github.stop)
        github.git_root = git.root
        slack = FakeSlack().start()
        stack.callback(slack.stop)
        git.make_repo(REPO, DEMO)
        github.add_repo(REPO)
        settings = Settings(
            database_url=url,
            state_dir=root / "state",
            temporal_address=temporal.address,
            task_queue=f"chaos-{name}",
            loop_task_queue=f"chaos-loops-{name}",
            loop_files_dir=root / "loops",
        )
        (root / "loops" / f"{LOOP}.yaml").write_text(loop_file(REPO))
        slow = f"sleep {GRACE_SECONDS + 5} && {PYTEST}"
        (root / "loops" / f"{SLOW_LOOP}.yaml").write_text(loop_file(REPO, SLOW_LOOP, slow))
        model.responder = respond(REPO)
        client = await connect(settings)
        await register_search_attributes(client, settings.namespace)
        agent, _ = await apply_agent(await get_pool(url), chaos_agent(REPO, root / "mcp"))
        events = [EventType(name=name, fields=()) for name in ("chaos.go", "chaos.done")]
        await apply_playbooks(client, await get_pool(url), chaos_playbooks(), events, settings.task_queue)
        world = ChaosWorld(root, postgres, temporal, model, github, git, slack, settings, client, agent)
        stack.push_async_callback(world.stop_all)
        started = [world.spawn(worker) for worker in WORKERS]
        await asyncio.gather(*(world.ready(worker) for worker in started))
        yield world
