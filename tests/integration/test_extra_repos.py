"""`sandbox.repos`, with real git over smart HTTP and real bubblewrap: acquiring a workspace
clones each repository into it with the worker's credentials (a one-command header: never in
an argument, a URL or a git config), commands read it and cannot change it, the workspace's
diff never includes it, and a command cannot swap its folder for a link to the host."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import runtime as activity_runtime
from activities.code.files import write_file
from activities.loops import workspace
from activities.loops.host import configure_host
from activities.loops.loop_activities import acquire_workspace
from activities.loops.sandbox import SandboxRun, run_sandboxed, sandbox_problem
from activities.tool_errors import ToolError
from config.settings import Settings
from surfaces.cli.extra_repo_check import extra_repo_checks
from tests.fakes.git_http import FakeGitHost
from tests.integration.loop_env import TOKEN, loop_world, project_with
from workflows.loop_types import (
    AcquireRequest,
    ExtraRepo,
    Limits,
    LoopStatus,
    Outcome,
    RepoSource,
    Sandbox,
    Step,
)

QUICK = Limits(command_timeout_s=30, stall_timeout_s=20)
BASIC = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()


@pytest.fixture
def git_host(tmp_path: Path) -> Iterator[FakeGitHost]:
    host = FakeGitHost(tmp_path / "git", token=TOKEN).start()
    activity_runtime.configure(
        Settings(state_dir=tmp_path / "state", github_git_url=host.url, github_token=SecretStr(TOKEN))
    )
    configure_host(tmp_path / "workspaces", name=f"extra-{uuid.uuid4().hex[:6]}")
    yield host
    host.stop()


@pytest.fixture
def git_argv(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every command line the worker's git commands run with."""
    seen: list[list[str]] = []
    real = asyncio.create_subprocess_exec

    async def recording(*argv: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        seen.append([str(word) for word in argv])
        return await real(*argv, **kwargs)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recording)
    return seen


def _repos(git: FakeGitHost, tmp_path: Path) -> tuple[str, list[ExtraRepo]]:
    project, shared, local = f"acme/demo-{uuid.uuid4().hex[:6]}", "acme/shared", tmp_path / "fixtures"
    git.make_repo(project, project_with(tmp_path, **{"docs__guide.md": "# guide\n"}))
    files = tmp_path / "shared-files"
    (files / "schemas").mkdir(parents=True)
    (files / "schemas" / "order.json").write_text('{"type": "object"}\n')
    git.make_repo(shared, files)
    local.mkdir()
    (local / "sample.csv").write_text("a,b\n1,2\n")
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "one"]):
        who = ["-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(["git", *who, *argv], cwd=local, check=True, capture_output=True)
    return project, [
        ExtraRepo(github=shared, into="vendor/shared"),
        ExtraRepo(path=str(local), into="fixtures"),
    ]


def _files_holding(root: Path, text: str) -> list[str]:
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink() and text.encode() in path.read_bytes():
                found.append(str(path))
    return found


async def test_extra_repositories_are_cloned_read_only_and_stay_out_of_the_diff(
    git_host: FakeGitHost, git_argv: list[list[str]], tmp_path: Path
) -> None:
    assert sandbox_problem() is None, sandbox_problem()
    project, extras = _repos(git_host, tmp_path)
    request = AcquireRequest(
        loop_id=f"loop-{uuid.uuid4().hex[:6]}", repo=RepoSource(github=project), repos=extras
    )
    handle = await ActivityEnvironment().run(acquire_workspace, request)
    root = Path(handle.path)
    assert (root / "vendor/shared/schemas/order.json").read_text() == '{"type": "object"}\n'
    assert (root / "fixtures/sample.csv").read_text() == "a,b\n1,2\n"

    # The clone used the worker's token, and it is nowhere: no argument, no file, no config.
    assert any(ok for _, path, ok in git_host.requests if "acme/shared" in path)
    assert git_argv and not [argv for argv in git_argv if any(TOKEN in w or BASIC in w for w in argv)]
    for secret in (TOKEN, BASIC):
        assert _files_holding(root, secret) == [] and _files_holding(workspace.git_dir(root), secret) == []

    sandbox = Sandbox(repos=extras)
    command = (
        "cat vendor/shared/schemas/order.json; "
        "echo changed > vendor/shared/schemas/order.json; touch vendor/shared/new; rm fixtures/sample.csv; "
        "echo mine > notes.txt"
    )
    ended = await run_sandboxed(SandboxRun(command, root, {}, QUICK, sandbox, tmp_path / "1.log"))
    assert '{"type": "object"}' in ended.tail  # it can read them
    assert ended.tail.count("Read-only file system") == 3, ended.tail
    assert (root / "vendor/shared/schemas/order.json").read_text() == '{"type": "object"}\n'
    assert not (root / "vendor/shared/new").exists() and (root / "fixtures/sample.csv").exists()
    assert (root / "notes.txt").read_text() == "mine\n"  # the rest of the workspace stays writable

    with pytest.raises(ToolError, match="inside vendor/shared, a repository of its own"):
        write_file(root, "vendor/shared/schemas/order.json", "{}")  # the coding tools run outside
    patch = (await workspace.diff(root, handle.base_commit)).decode()
    assert "notes.txt" in patch
    assert "vendor/" not in patch and "fixtures/" not in patch

    # Swapped for a link (as a command could leave it), the next command does not start.
    shutil.move(root / "vendor/shared", root / "vendor/away")
    os.symlink("/etc", root / "vendor/shared")
    swapped = await run_sandboxed(
        SandboxRun("cat vendor/shared/hostname", root, {}, QUICK, sandbox, tmp_path / "2.log")
    )
    assert swapped.outcome is Outcome.ABNORMAL
    assert swapped.reason == (
        "could not start: sandbox.repos: vendor/shared is no longer the folder cloned when the workspace "
        "was acquired (a command moved or replaced it); start again on a fresh workspace"
    )


async def test_a_folder_the_repository_already_has_is_refused(git_host: FakeGitHost, tmp_path: Path) -> None:
    project, extras = _repos(git_host, tmp_path)
    clash = [extras[0].model_copy(update={"into": "docs"})]
    request = AcquireRequest(
        loop_id=f"loop-{uuid.uuid4().hex[:6]}", repo=RepoSource(github=project), repos=clash
    )
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(acquire_workspace, request)
    assert raised.value.message == (
        "sandbox.repos: docs already exists in the workspace's repository; choose another `into` for it"
    )
    assert raised.value.non_retryable


async def test_a_loop_s_commands_read_its_extra_repository_and_its_diff_leaves_it_out(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    files = tmp_path / "shared-files"
    (files / "schemas").mkdir(parents=True)
    (files / "schemas" / "order.json").write_text('{"type": "object"}\n')
    sandbox = Sandbox(repos=[ExtraRepo(github="acme/shared", into="vendor/shared")])
    limits = Limits(total_rounds=1, command_timeout_s=60, stall_timeout_s=30, memory_mb=1024)
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        world.git.make_repo("acme/shared", files)
        verify = "grep -q object vendor/shared/schemas/order.json && echo read > read.txt"
        spec = world.spec({Step.VERIFY: verify}, sandbox=sandbox, limits=limits)
        _, result = await world.run(spec)
        patch = await world.diff(result)
    assert result.status is LoopStatus.SUCCESS, result.reason
    assert "read.txt" in patch and "vendor/" not in patch


async def test_loops_doctor_names_each_extra_repository_it_cannot_reach(
    git_host: FakeGitHost, tmp_path: Path
) -> None:
    _, extras = _repos(git_host, tmp_path)
    missing = [ExtraRepo(github="acme/gone", into="gone"), ExtraRepo(path=str(tmp_path), into="plain")]
    settings = Settings(github_git_url=git_host.url, github_token=SecretStr(TOKEN))
    checks = await extra_repo_checks([*extras, *missing], settings)
    assert checks[:2] == [
        ("repo vendor/shared", True, "acme/shared@its default branch reachable, read-only"),
        ("repo fixtures", True, f"{tmp_path / 'fixtures'} (a local checkout)"),
    ]
    assert checks[2][:2] == ("repo gone", False) and checks[2][2].startswith("acme/gone cannot be reached: ")
    assert checks[3] == ("repo plain", False, f"{tmp_path} is not a git checkout")
    assert TOKEN not in repr(checks)
