"""A coding task's world for the tests: the ordinary worker, a loop worker that holds
workspaces, the demo project in a bare repository served over git's smart HTTP, and a fake
GitHub whose Git data and pulls API write into that same repository; a scripted model that
fixes the demo project, and a clone of what it pushed."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from temporalio.client import Client, WorkflowHandle

from activities.github import client as github_client
from activities.store.agents import StoredAgent, apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.tasks import start_task
from tests.fakes.git_http import FakeGitHost
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_git import pull_requests
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.integration.loop_env import DEMO, PYTEST
from workers.loops import build_loop_workers
from workers.worker import build_worker
from workflows.types import SurfaceContext, TaskResult

TOKEN = "ghp_coding_secret_0123456789"
MODEL = "openai/gpt-4o-mini"
CODE_TOOLS = [
    {"name": "code.open_workspace", "permissions": ["code:read"]},
    {"name": "code.read_file", "permissions": ["code:read"]},
    {"name": "code.search", "permissions": ["code:read"]},
    {"name": "code.diff", "permissions": ["code:read"]},
    {"name": "code.edit_file", "permissions": ["code:write"]},
    {"name": "code.run_tests", "permissions": ["code:run"]},
    {"name": "code.run", "permissions": ["code:run"]},
    {"name": "github.create_pull_request", "permissions": ["pulls:write"]},
]
# The edit that fixes the demo project's mean().
FIX = {"path": "calc.py", "old": "/ (len(values) + 1)", "new": "/ len(values)"}


@dataclass
class CodingWorld:
    client: Client
    settings: Settings
    git: FakeGitHost
    github: FakeGitHub
    repo: str

    async def agent(self, **spec: Any) -> StoredAgent:
        """An agent bound to the repository, with the coding tools and an approver."""
        config = AgentConfig.model_validate(
            {
                "apiVersion": "openloop.ai/v1alpha1",
                "kind": "Agent",
                "metadata": {"name": f"coder-{uuid.uuid4().hex[:8]}"},
                "spec": {
                    "model_policy": {"default": MODEL, "max_output_tokens": 256},
                    "surfaces": {"github": {"repos": [self.repo]}},
                    "tools": CODE_TOOLS,
                    "approvals": {"approvers": ["cli:local"]},
                    "coding": {
                        "verify": PYTEST,
                        "limits": {"command_timeout": "2m", "memory": "1Gi"},
                    },
                    **spec,
                },
            }
        )
        stored, _ = await apply_agent(await get_pool(self.settings.require_database_url()), config)
        return stored

    async def start(self, agent: StoredAgent, request: str) -> WorkflowHandle[Any, Any]:
        context = SurfaceContext(surface="cli", channel="coding", user="cli:local")
        task_id = f"task-code-{uuid.uuid4().hex[:10]}"
        handle, started = await start_task(
            self.client, self.settings, agent, context, request, task_id=task_id
        )
        assert started
        return handle

    def pulls(self) -> list[dict[str, Any]]:
        return pull_requests(self.github, self.repo)

    def branches(self) -> list[str]:
        heads = self.git.root / f"{self.repo}.git" / "refs" / "heads"
        packed = self.git.root / f"{self.repo}.git" / "packed-refs"
        names = [p.relative_to(heads).as_posix() for p in heads.rglob("*") if p.is_file()]
        if packed.exists():
            names += [
                line.split(" refs/heads/", 1)[1]
                for line in packed.read_text().splitlines()
                if " refs/heads/" in line
            ]
        return sorted(set(names))


@asynccontextmanager
async def coding_world(
    client: Client, pg_url: str, tmp_path: Path, project: Path = DEMO
) -> AsyncIterator[CodingWorld]:
    git = FakeGitHost(tmp_path / "git", token=TOKEN).start()
    github = FakeGitHub(token=TOKEN).start()
    github.git_root = git.root
    repo = f"acme/api-{uuid.uuid4().hex[:6]}"
    git.make_repo(repo, project)
    github.add_repo(repo)
    suffix = uuid.uuid4().hex[:8]
    github_client.reset_clients()
    settings = Settings(
        database_url=pg_url,
        state_dir=tmp_path / "state",
        task_queue=f"tq-{suffix}",
        loop_task_queue=f"loops-{suffix}",
        github_token=SecretStr(TOKEN),
        github_api_url=github.url,
        github_git_url=git.url,
        workspaces_dir=tmp_path / "workspaces",
    )
    try:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(build_worker(client, settings))
            for worker in build_loop_workers(client, settings, name=f"coding-{suffix}")[1]:
                await stack.enter_async_context(worker)
            yield CodingWorld(client, settings, git, github, repo)
    finally:
        github_client.reset_clients()
        github.stop()
        git.stop()


def script_fix(api: FakeModelAPI, repo: str, *, edit: bool = True) -> None:
    """The model opens a workspace on `repo`, finds the bug, fixes it (unless not `edit`),
    runs the tests and proposes a pull request."""
    api.answer_tool_calls([tool_call("c1", "code__open_workspace", {"repo": repo})])
    api.answer_tool_calls([tool_call("c2", "code__search", {"pattern": r"len\(values\) \+ 1"})])
    if edit:
        api.answer_tool_calls([tool_call("c3", "code__edit_file", FIX)])
    api.answer_tool_calls([tool_call("c4", "code__run_tests", {})])
    api.answer_tool_calls(
        [tool_call("c5", "github__create_pull_request", {"title": "Fix calc.mean", "body": "Divide by n."})]
    )
    api.answer("Proposed the fix.")


def cloned(world: CodingWorld, branch: str, into: Path) -> Path:
    url = f"{world.git.url}/{world.repo}.git".replace("://", f"://x:{TOKEN}@", 1)
    subprocess.run(
        ["git", "clone", "-q", "--branch", branch, url, str(into)], check=True, capture_output=True
    )
    return into


async def result_of(handle: WorkflowHandle[Any, Any]) -> TaskResult:
    result: TaskResult = await handle.result()
    return result
