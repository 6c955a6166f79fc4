"""A repair loop's world for the tests: the ordinary worker, a loop worker, a demo project in
a bare repository served over git's smart HTTP, and helpers to run a loop to its end."""

from __future__ import annotations

import shutil
import textwrap
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from temporalio.client import Client

from activities.store import loops as loop_rows
from activities.store.db import get_pool
from config.settings import Settings
from tests.fakes.git_http import FakeGitHost
from workers.loops import build_loop_workers
from workers.worker import build_worker
from workflows.loop_types import (
    LOOP_WORKFLOW_NAME,
    Limits,
    LoopInput,
    LoopResult,
    LoopSpec,
    Mission,
    RepoSource,
    RoundReport,
    Step,
    WorkerTimeouts,
)

DEMO = Path(__file__).resolve().parents[2] / "config" / "loops" / "demo-project"
PYTEST = "python -m pytest -q -p no:cacheprovider"
TOKEN = "loop-test-token"


@dataclass
class LoopWorld:
    client: Client
    settings: Settings
    git: FakeGitHost
    repo: str

    def spec(self, commands: dict[Step, str], **changes: Any) -> LoopSpec:
        limits = changes.pop("limits", Limits(command_timeout_s=60, stall_timeout_s=30, memory_mb=1024))
        return LoopSpec(
            name="demo",
            mission=Mission(objective="make the tests pass"),
            repo=RepoSource(github=self.repo, base="main"),
            commands=commands,
            limits=limits,
            **changes,
        )

    async def run(self, spec: LoopSpec, timeouts: WorkerTimeouts | None = None) -> tuple[str, LoopResult]:
        loop_id = f"loop-test-{uuid.uuid4().hex[:8]}"
        result = await self.client.execute_workflow(
            LOOP_WORKFLOW_NAME,
            LoopInput(
                loop_id=loop_id,
                spec=spec,
                loop_queue=self.settings.loop_task_queue,
                timeouts=timeouts or WorkerTimeouts(),
            ),
            id=loop_id,
            task_queue=self.settings.task_queue,
            result_type=LoopResult,
        )
        return loop_id, result

    async def reports(self, loop_id: str) -> list[RoundReport]:
        return await loop_rows.reports(await get_pool(self.settings.require_database_url()), loop_id)

    async def diff(self, result: LoopResult) -> str:
        assert result.diff is not None
        pool = await get_pool(self.settings.require_database_url())
        return ((await loop_rows.load_diff(pool, result.diff.sha256)) or b"").decode()


def project_with(tmp_path: Path, **files: str) -> Path:
    """The demo project plus extra or replaced files (names with `__` for `/`)."""
    project = tmp_path / "project"
    shutil.copytree(DEMO, project, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in files.items():
        target = project / name.replace("__", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    return project


@asynccontextmanager
async def loop_world(
    client: Client, pg_url: str, tmp_path: Path, project: Path, *, loop_worker: bool = True, **overrides: Any
) -> AsyncIterator[LoopWorld]:
    git = FakeGitHost(tmp_path / "git", token=TOKEN).start()
    repo = f"acme/demo-{uuid.uuid4().hex[:6]}"
    git.make_repo(repo, project)
    suffix = uuid.uuid4().hex[:8]
    settings = Settings(
        database_url=pg_url,
        state_dir=tmp_path / "state",
        task_queue=f"tq-{suffix}",
        loop_task_queue=f"loops-{suffix}",
        github_token=SecretStr(TOKEN),
        github_git_url=git.url,
        workspaces_dir=tmp_path / "workspaces",
        loop_files_dir=tmp_path / "loop-files",
        **overrides,
    )
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(build_worker(client, settings))
        if loop_worker:
            for worker in build_loop_workers(client, settings, name=f"in-test-{suffix}")[1]:
                await stack.enter_async_context(worker)
        try:
            yield LoopWorld(client, settings, git, repo)
        finally:
            git.stop()
