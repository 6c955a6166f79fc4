"""A worker SIGKILLed right after GitHub created the draft pull request of a coding task and
before the activity reported it: another worker takes over, and the task still ends with
exactly one branch, one draft pull request and a reply that links it. GitHub has no
idempotency keys; the retried attempt writes the same commit again, finds the branch at it
and the pull request by its head branch, instead of opening a second one.

The ordinary worker is a forked production worker (`tests.reliability.crash_worker`), killed
and replaced; the loop worker that holds the workspace runs in the test and lives on.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path

from pydantic import SecretStr
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from config.settings import Settings
from tests.fakes.git_http import FakeGitHost
from tests.fakes.github_api import FakeGitHub
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import approve_when_pending, eventually_async
from tests.integration.coding_env import TOKEN, CodingWorld
from tests.integration.loop_env import DEMO
from tests.reliability.harness import FAKE_OPENAI_KEY, WorkerForker, WorkerProcess, worker_env
from workers.embedded import TemporalDevServer
from workers.loops import build_loop_workers
from workflows.code_types import CodeActivity
from workflows.types import TaskStatus

FIX = {"path": "calc.py", "old": "/ (len(values) + 1)", "new": "/ len(values)"}


def script_fix(model: FakeModelAPI, repo: str) -> None:
    model.answer_tool_calls([tool_call("c1", "code__open_workspace", {"repo": repo})])
    model.answer_tool_calls([tool_call("c2", "code__edit_file", FIX)])
    model.answer_tool_calls([tool_call("c3", "code__run_tests", {})])
    model.answer_tool_calls(
        [tool_call("c4", "github__create_pull_request", {"title": "Fix calc.mean", "body": "Divide by n."})]
    )
    model.answer("Proposed the fix.")


def file_on_branch(git: FakeGitHost, repo: str, branch: str, path: str) -> str:
    show = ["git", "show", f"{branch}:{path}"]
    bare = git.root / f"{repo}.git"
    return subprocess.run(show, cwd=bare, capture_output=True, text=True, check=True).stdout


async def test_worker_killed_after_github_opened_the_pull_request_leaves_exactly_one(
    client: Client,
    dev_server: TemporalDevServer,
    pg_url: str,
    task_queue: str,
    tmp_path: Path,
    forker: WorkerForker,
) -> None:
    git = FakeGitHost(tmp_path / "git", token=TOKEN).start()
    github = FakeGitHub(token=TOKEN).start()
    github.git_root = git.root
    repo = f"acme/api-{uuid.uuid4().hex[:6]}"
    git.make_repo(repo, DEMO)
    github.add_repo(repo)
    github.hang_after_accept("POST", f"/repos/{repo}/pulls", seconds=20)  # opened, no answer
    model = FakeModelAPI().start()
    script_fix(model, repo)
    settings = Settings(
        database_url=pg_url,
        state_dir=tmp_path / "state",
        task_queue=task_queue,
        loop_task_queue=f"loops-{uuid.uuid4().hex[:8]}",
        github_token=SecretStr(TOKEN),
        github_api_url=github.url,
        github_git_url=git.url,
        workspaces_dir=tmp_path / "workspaces",
    )
    world = CodingWorld(client, settings, git, github, repo)
    env = worker_env(
        dev_server.address,
        pg_url,
        task_queue,
        tmp_path,
        OPENLOOP_LOOP_TASK_QUEUE=settings.loop_task_queue,
        OPENLOOP_MODEL_API_BASE=model.base_url,
        OPENAI_API_KEY=FAKE_OPENAI_KEY,
        GITHUB_TOKEN=TOKEN,
        GITHUB_API_URL=github.url,
        GITHUB_GIT_URL=git.url,
    )
    first = await forker.spawn("first", env, tmp_path)
    second: WorkerProcess | None = None
    _, loop_workers = build_loop_workers(client, settings, name="holds-the-workspace")
    try:
        async with loop_workers[0], loop_workers[1]:
            await first.ready()
            agent = await world.agent()
            handle = await world.start(agent, f"test_mean fails on main in {repo}; fix it")
            await approve_when_pending(handle)
            await eventually_async(lambda: len(world.pulls()) == 1, "GitHub to open the pull request", 60)
            await first.kill()  # the pull request exists; the activity never reported it
            second = await forker.spawn("second", env, tmp_path)
            result = await asyncio.wait_for(handle.result(), 90)
            history = await handle.fetch_history()
            (pull,) = world.pulls()
            branches = world.branches()
            pushed = file_on_branch(git, repo, f"openloop/{handle.id}", "calc.py")
    finally:
        for worker in (first, second):
            if worker is not None:
                await worker.kill()
        model.stop()
        github.stop()
        git.stop()

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert github.count("POST", f"/repos/{repo}/pulls") == 1
    assert pull["draft"] is True and pull["base"]["ref"] == "main"
    assert pull["head"]["ref"] == f"openloop/{handle.id}"
    assert branches == ["main", f"openloop/{handle.id}"]
    assert "return sum(values) / len(values)" in pushed
    assert pull["html_url"] in result.reply
    assert second is not None
    # The second worker's attempt found the pull request the killed one had opened.
    assert f"pull request #{pull['number']} of task {handle.id}" in second.log()
    assert f"Opened draft pull request #{pull['number']}: {pull['html_url']}" in str(
        model.requests[-1].body["messages"]
    )
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == CodeActivity.OPEN_PULL_REQUEST
    }
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]
    assert len(scheduled) == 1 and len(attempts) == 1 and attempts[0] >= 2
