"""The pull-request activity against a fake GitHub whose Git data API writes into a real bare
repository (served over git's smart HTTP), with the approved files in real Postgres.

Covers: one branch, one commit on the base and one draft pull request, cloned back over
HTTP with the edited, new (executable) and deleted files; a second run changing nothing; an
attempt that timed out after GitHub accepted the commit or the pull request, then retried;
a branch created by an attempt whose answer was lost; a second approved diff moving the
branch under the same pull request; and the errors the workflow sees (missing diff, GitHub
refusals, server errors), none of which carries the token.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from github import Auth, Github
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import runtime as activity_runtime
from activities.github import client as github_client
from activities.github.pull_request import open_pull_request
from activities.store.changes import FileChange, save_changes
from activities.store.db import get_pool
from config.settings import Settings
from tests.fakes.git_http import FakeGitHost
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_git import pull_requests
from workflows.code_types import PullRequestInput, PullRequestResult
from workflows.tool_call_types import ApprovalRecord

TOKEN = "ghp_pr_secret_token_0123456789"
APPROVED_AT = "2026-11-22T10:00:00.123456+00:00"
CHANGES = [
    FileChange("src/app.py", "100644", b"print('new greeting')\n"),
    FileChange("scripts/run.sh", "100755", b"#!/bin/sh\necho run\n"),
    FileChange("docs/old.txt", "100644", None),
]


def git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


@dataclass
class World:
    fake: FakeGitHub
    host: FakeGitHost
    settings: Settings
    repo: str
    bare: Path
    base_commit: str
    tmp: Path

    async def store(self, files: list[FileChange]) -> str:
        diff = hashlib.sha256(repr((uuid.uuid4().hex, files)).encode()).hexdigest()
        await save_changes(
            await get_pool(self.settings.require_database_url()), diff, self.base_commit, files
        )
        return diff

    def input(self, diff: str, task_id: str | None = None) -> PullRequestInput:
        return PullRequestInput(
            task_id=task_id or f"task-slack-Ev{uuid.uuid4().hex[:10]}",
            repo=self.repo,
            base="main",
            base_commit=self.base_commit,
            diff_sha256=diff,
            title="Print the new greeting",
            body="The greeting changes; `scripts/run.sh` runs it.\n\nTests pass.",
            approval=ApprovalRecord("req-1", "act-1", "U_ALICE", APPROVED_AT),
            agent="coder",
        )

    def clone(self, branch: str) -> Path:
        target = self.tmp / f"clone-{uuid.uuid4().hex[:8]}"
        address = self.host.url.replace("http://", f"http://x-access-token:{TOKEN}@")
        git("clone", "--quiet", "--branch", branch, f"{address}/{self.repo}.git", str(target))
        return target

    def branches(self) -> list[str]:
        return git("--git-dir", str(self.bare), "for-each-ref", "--format=%(refname)", "refs/heads/").split()

    def commit_objects(self) -> int:
        """Every commit object in the repository, reachable or not."""
        listing = git("--git-dir", str(self.bare), "cat-file", "--batch-all-objects", "--batch-check")
        return sum(1 for line in listing.splitlines() if line.split()[1] == "commit")


@pytest.fixture
def world(db_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setattr(github_client, "REQUEST_TIMEOUT_SECONDS", 1)
    github_client.reset_clients()
    fake = FakeGitHub(token=TOKEN).start()
    host = FakeGitHost(tmp_path / "git", token=TOKEN).start()
    fake.git_root = host.root
    project = tmp_path / "project"
    for path, text in {
        "README.md": "hello\n",
        "src/app.py": "print('old')\n",
        "docs/old.txt": "gone\n",
    }.items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text)
    repo = f"acme/r{uuid.uuid4().hex[:8]}"
    bare = host.make_repo(repo, project)
    fake.add_repo(repo)
    settings = db_settings.model_copy(update={"github_api_url": fake.url, "github_token": SecretStr(TOKEN)})
    activity_runtime.configure(settings)
    base = git("--git-dir", str(bare), "rev-parse", "main").strip()
    yield World(fake, host, settings, repo, bare, base, tmp_path)
    fake.stop()
    host.stop()
    github_client.reset_clients()


async def run(inp: PullRequestInput) -> PullRequestResult:
    result: PullRequestResult = await ActivityEnvironment().run(open_pull_request, inp)
    return result


def assert_no_token(err: BaseException) -> None:
    seen: BaseException | None = err
    while seen is not None:
        assert TOKEN not in str(seen) and TOKEN not in repr(seen)
        seen = seen.__cause__ or seen.__context__


async def test_one_branch_one_commit_one_draft_pull_request_and_a_second_run_changes_nothing(
    world: World,
) -> None:
    inp = world.input(await world.store(CHANGES))
    result = await run(inp)

    assert result.branch == f"openloop/{inp.task_id}" == inp.branch
    assert world.branches() == ["refs/heads/main", f"refs/heads/{inp.branch}"]
    assert world.commit_objects() == 2  # the base and ours
    [pull] = pull_requests(world.fake, world.repo)
    assert (pull["number"], pull["html_url"]) == (result.number, result.url)
    assert pull["draft"] is True and pull["state"] == "open"
    assert (pull["title"], pull["body"]) == (inp.title, inp.body)
    assert (pull["head"]["ref"], pull["head"]["sha"], pull["base"]["ref"]) == (
        inp.branch,
        result.commit,
        "main",
    )

    # What PyGithub reads back, through the same wire format.
    gh = Github(base_url=world.fake.url, auth=Auth.Token(TOKEN), retry=None)
    remote = gh.get_repo(world.repo)
    assert remote.get_pull(result.number).draft and remote.get_pull(result.number).head.sha == result.commit
    commit = remote.get_git_commit(result.commit)
    assert [p.sha for p in commit.parents] == [world.base_commit]
    assert commit.message == (
        f"Print the new greeting\n\nMade by OpenLoop task {inp.task_id} (agent coder), approved by U_ALICE."
    )
    assert commit.author.name == commit.committer.name == "OpenLoop"
    assert remote.get_git_ref(f"heads/{inp.branch}").object.sha == result.commit
    assert remote.get_branch(inp.branch).commit.sha == result.commit
    assert {f.filename: f.status for f in remote.get_commit(result.commit).files} == {
        "src/app.py": "modified",
        "scripts/run.sh": "added",
        "docs/old.txt": "removed",
    }

    clone = world.clone(inp.branch)
    assert (clone / "src/app.py").read_bytes() == b"print('new greeting')\n"
    assert (clone / "scripts/run.sh").read_bytes() == b"#!/bin/sh\necho run\n"
    assert os.stat(clone / "scripts/run.sh").st_mode & 0o111
    assert "100755" in git("ls-files", "-s", "scripts/run.sh", cwd=clone)
    assert not (clone / "docs/old.txt").exists() and (clone / "README.md").read_text() == "hello\n"
    assert git("rev-parse", "HEAD^", cwd=clone).strip() == world.base_commit
    assert git("log", "-1", "--format=%aI %cI %ae", cwd=clone).split() == [
        "2026-11-22T10:00:00+00:00",
        "2026-11-22T10:00:00+00:00",
        "openloop@openloop.invalid",
    ]

    again = await run(inp)
    assert again == result
    assert len(pull_requests(world.fake, world.repo)) == 1 and world.commit_objects() == 2
    assert world.branches() == ["refs/heads/main", f"refs/heads/{inp.branch}"]
    assert world.fake.count("POST", rf"/repos/{world.repo}/pulls") == 1
    assert world.fake.count("POST", rf"/repos/{world.repo}/git/refs") == 1
    assert world.fake.count("PATCH", rf"/repos/{world.repo}/git/refs/.*") == 0


async def test_a_commit_accepted_after_the_client_gave_up_is_made_once(world: World) -> None:
    inp = world.input(await world.store(CHANGES))
    world.fake.hang_after_accept("POST", f"/repos/{world.repo}/git/commits", seconds=2.5)
    with pytest.raises(ApplicationError) as first:
        await run(inp)
    assert first.value.type == "GitHubTimeout" and not first.value.non_retryable
    assert_no_token(first.value)
    assert world.commit_objects() == 2 and world.branches() == ["refs/heads/main"]  # stored, unnamed

    result = await run(inp)  # Temporal's retry
    assert world.commit_objects() == 2  # the same commit again, not a second one
    assert world.fake.count("POST", rf"/repos/{world.repo}/git/commits") == 2
    [pull] = pull_requests(world.fake, world.repo)
    assert pull["number"] == result.number and pull["head"]["sha"] == result.commit
    assert git("--git-dir", str(world.bare), "rev-parse", inp.branch).strip() == result.commit


async def test_a_pull_request_accepted_after_the_client_gave_up_is_opened_once(world: World) -> None:
    inp = world.input(await world.store(CHANGES))
    world.fake.hang_after_accept("POST", f"/repos/{world.repo}/pulls", seconds=2.5)
    with pytest.raises(ApplicationError) as first:
        await run(inp)
    assert first.value.type == "GitHubTimeout" and not first.value.non_retryable
    assert_no_token(first.value)
    assert len(pull_requests(world.fake, world.repo)) == 1  # GitHub did open it

    result = await run(inp)
    [pull] = pull_requests(world.fake, world.repo)
    assert (pull["number"], pull["draft"], result.commit) == (result.number, True, pull["head"]["sha"])
    assert world.fake.count("POST", rf"/repos/{world.repo}/pulls") == 1
    assert world.commit_objects() == 2


async def test_a_branch_another_attempt_created_is_read_again_not_created_twice(world: World) -> None:
    inp = world.input(await world.store(CHANGES))
    first = await run(inp)
    # A stale read: the branch looks missing, so creating it answers "Reference already exists".
    world.fake.fail("GET", f"/repos/{world.repo}/git/ref/heads/{inp.branch}", status=404, message="Not Found")
    again = await run(inp)
    assert again == first
    assert world.fake.count("POST", rf"/repos/{world.repo}/git/refs") == 2
    assert world.fake.count("PATCH", rf"/repos/{world.repo}/git/refs/.*") == 0
    assert len(pull_requests(world.fake, world.repo)) == 1


async def test_a_second_approved_diff_moves_the_branch_under_the_same_pull_request(world: World) -> None:
    inp = world.input(await world.store(CHANGES))
    first = await run(inp)
    more = [*CHANGES, FileChange("README.md", "100644", b"hello again\n")]
    second = await run(inp.model_copy(update={"diff_sha256": await world.store(more)}))
    assert second.number == first.number and second.commit != first.commit
    assert world.fake.count("PATCH", rf"/repos/{world.repo}/git/refs/.*") == 1
    [pull] = pull_requests(world.fake, world.repo)
    assert pull["head"]["sha"] == second.commit
    clone = world.clone(inp.branch)
    assert (clone / "README.md").read_text() == "hello again\n"
    assert git("rev-parse", "HEAD^", cwd=clone).strip() == world.base_commit  # replaced, not stacked


async def test_a_missing_stored_diff_is_not_retried_and_asks_github_nothing(world: World) -> None:
    with pytest.raises(ApplicationError) as err:
        await run(world.input("0" * 64))
    assert err.value.non_retryable and err.value.type == "WorkspaceError"
    assert "stored diff" in str(err.value) and "missing" in str(err.value)
    assert world.fake.requests == []
    assert_no_token(err.value)


async def test_github_refusals_are_not_retried_and_server_errors_are(world: World) -> None:
    diff = await world.store(CHANGES)
    unknown_base = world.input(diff).model_copy(update={"base_commit": "f" * 40})
    with pytest.raises(ApplicationError) as refused:
        await run(unknown_base)
    assert refused.value.non_retryable and refused.value.type == "GitHubRequestRejected"
    assert "writing the commit" in str(refused.value) and "404" in str(refused.value)
    assert_no_token(refused.value)

    no_base_branch = world.input(diff).model_copy(update={"base": "no-such-branch"})
    with pytest.raises(ApplicationError) as invalid:
        await run(no_base_branch)
    assert invalid.value.non_retryable and "opening the pull request" in str(invalid.value)
    assert_no_token(invalid.value)

    world.fake.fail("POST", f"/repos/{world.repo}/git/trees", status=502)
    inp = world.input(diff)
    with pytest.raises(ApplicationError) as outage:
        await run(inp)
    assert outage.value.type == "GitHubServerError" and not outage.value.non_retryable
    assert_no_token(outage.value)
    result = await run(inp)  # the retry after the outage
    [pull] = pull_requests(world.fake, world.repo)
    assert pull["number"] == result.number

    # A CLI task's id holds `:`, which git refuses in a branch name: the branch spells it `-`.
    cli_task = await run(world.input(diff, task_id="task-cli-a:b"))
    assert cli_task.branch == "openloop/task-cli-a-b"
