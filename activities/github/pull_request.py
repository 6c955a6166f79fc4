"""Open an approved workspace diff as one branch, one commit and one draft pull request.

Runs on an ordinary worker (where GitHub's credentials are) after a person approved the
diff; the diff's files are read from Postgres (`activities.store.changes`), never carried in
workflow history. GitHub has no idempotency keys, so every write is find-or-create and a
retried attempt, even after a timeout that GitHub had accepted, makes one of each:

- blobs and trees are content-addressed: writing them again gives the same shas;
- the commit has fixed author, committer and date (the approval's time), so the same input
  makes the same commit sha again;
- the branch `openloop/<task_id>` is created at the commit, or moved (forced) to it; a
  create that loses a race ("Reference already exists") reads the branch again;
- the pull request is looked up by its head branch in any state before one is created, and
  a create that answers "already exists" looks again.

Errors: GitHub's 5xx, 429 and timeouts stay retryable (`activities.github.client`); any
other refusal is a non-retryable `GitHubRequestRejected` naming the step that failed.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar
from urllib.parse import quote

from github import Github, GithubException
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.github.client import github_call
from activities.heartbeats import beating
from activities.runtime import runtime
from activities.store.changes import FileChange, load_changes
from activities.tool_errors import ToolError
from config.settings import Settings
from workflows.code_types import CodeActivity, PullRequestInput, PullRequestResult
from workflows.errors import ErrorType

T = TypeVar("T")

AUTHOR_NAME = "OpenLoop"
AUTHOR_EMAIL = "openloop@openloop.invalid"
BLOB_MODES = ("100644", "100755", "120000")
# What `git check-ref-format` refuses in a branch name (GitHub refuses the same).
_BAD_BRANCH = re.compile(r"[\x00-\x20~^:?*\[\\\x7f]|\.\.|@\{|//|/\.|\.lock(/|$)|[./]$")


@activity.defn(name=CodeActivity.OPEN_PULL_REQUEST)
async def open_pull_request(inp: PullRequestInput) -> PullRequestResult:
    async with beating("GitHub"):  # so a worker killed mid-push is noticed in half a minute
        return await _open(inp)


async def _open(inp: PullRequestInput) -> PullRequestResult:
    rt = runtime()
    files = await load_changes(await rt.pool(), inp.diff_sha256)
    if files is None:
        raise ApplicationError(
            f"the stored diff {inp.diff_sha256} of task {inp.task_id} is missing: its files were "
            "never saved or have been removed, so there is nothing to commit",
            type=ErrorType.WORKSPACE_ERROR,
            non_retryable=True,
        )
    if _BAD_BRANCH.search(inp.branch):
        raise _rejected(f"{inp.branch!r} is not a valid branch name")
    date = commit_date(inp.approval.decided_at_iso)
    settings, repo = rt.settings, inp.repo

    blobs: dict[bytes, str] = {}  # content -> blob sha: a content written once per attempt
    for change in files:
        if change.content is not None and change.content not in blobs:
            write = partial(_blob, repo=repo, content=change.content)
            blobs[change.content] = await _step(settings, repo, f"writing {change.path}", write)
            activity.heartbeat(change.path)
    entries = [_tree_entry(change, blobs) for change in files]
    commit = await _step(settings, repo, "writing the commit", lambda gh: _commit(gh, inp, entries, date))
    activity.heartbeat(commit)
    await _step(
        settings, repo, f"pointing {inp.branch} at {commit[:12]}", lambda gh: _branch(gh, inp, commit)
    )
    number, url = await _step(settings, repo, "opening the pull request", lambda gh: _pull_request(gh, inp))
    activity.logger.info("pull request #%s of task %s: %s at %s", number, inp.task_id, inp.branch, commit)
    return PullRequestResult(url=url, number=number, branch=inp.branch, commit=commit)


def commit_message(inp: PullRequestInput) -> str:
    return (
        f"{inp.title}\n\nMade by OpenLoop task {inp.task_id} (agent {inp.agent}), "
        f"approved by {inp.approval.approver}."
    )


def commit_date(decided_at_iso: str) -> str:
    """The approval's time as GitHub takes a commit date: whole seconds, UTC."""
    try:
        when = datetime.fromisoformat(decided_at_iso)
    except ValueError:
        raise _rejected(f"the approval's time {decided_at_iso!r} is not an ISO 8601 date") from None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rejected(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.GITHUB_REQUEST_REJECTED, non_retryable=True)


async def _step(settings: Settings, repo: str, doing: str, fn: Callable[[Github], T]) -> T:
    """One GitHub step; a refusal that retrying cannot heal (404, 422, 403) is non-retryable."""
    try:
        return await github_call(settings, repo, fn)
    except ToolError as exc:
        raise _rejected(f"{doing} on {repo} failed: {exc}") from exc


def _request(gh: Github, verb: str, path: str, **kwargs: Any) -> Any:
    _, data = gh.requester.requestJsonAndCheck(verb, path, **kwargs)
    return data


def _already_exists(exc: GithubException) -> bool:
    """A 422 that says an earlier attempt (or a racing one) already made this."""
    data = exc.data if isinstance(exc.data, dict) else {}
    texts = [str(data.get("message") or "")]
    texts += [str(e.get("message") or "") for e in data.get("errors") or [] if isinstance(e, dict)]
    return exc.status == 422 and any("already exists" in text.lower() for text in texts)


def _blob(gh: Github, repo: str, content: bytes) -> str:
    data = _request(
        gh,
        "POST",
        f"/repos/{repo}/git/blobs",
        input={"content": base64.b64encode(content).decode(), "encoding": "base64"},
    )
    return str(data["sha"])


def _tree_entry(change: FileChange, blobs: dict[bytes, str]) -> dict[str, Any]:
    mode = change.mode if change.mode in BLOB_MODES else "100644"
    sha = None if change.content is None else blobs[change.content]  # None deletes the path
    return {"path": change.path, "mode": mode, "type": "blob", "sha": sha}


def _commit(gh: Github, inp: PullRequestInput, entries: list[dict[str, Any]], date: str) -> str:
    """The approved files as one commit on the base commit; the same input, the same sha."""
    repo = inp.repo
    base = _request(gh, "GET", f"/repos/{repo}/git/commits/{inp.base_commit}")
    tree = _request(
        gh, "POST", f"/repos/{repo}/git/trees", input={"base_tree": base["tree"]["sha"], "tree": entries}
    )
    who = {"name": AUTHOR_NAME, "email": AUTHOR_EMAIL, "date": date}
    commit = _request(
        gh,
        "POST",
        f"/repos/{repo}/git/commits",
        input={
            "message": commit_message(inp),
            "tree": tree["sha"],
            "parents": [inp.base_commit],
            "author": who,
            "committer": who,
        },
    )
    return str(commit["sha"])


def _branch_sha(gh: Github, inp: PullRequestInput) -> str | None:
    try:
        ref = _request(gh, "GET", f"/repos/{inp.repo}/git/ref/heads/{quote(inp.branch)}")
    except GithubException as exc:
        if exc.status == 404:
            return None
        raise
    return str(ref["object"]["sha"])


def _branch(gh: Github, inp: PullRequestInput, commit: str) -> None:
    """Make `inp.branch` point at `commit`: create it, or move it there."""
    current = _branch_sha(gh, inp)
    if current is None:
        try:
            _request(
                gh,
                "POST",
                f"/repos/{inp.repo}/git/refs",
                input={"ref": f"refs/heads/{inp.branch}", "sha": commit},
            )
            return
        except GithubException as exc:
            if not _already_exists(exc):
                raise
        current = _branch_sha(gh, inp)  # made by an attempt whose answer was lost
    if current != commit:
        _request(
            gh,
            "PATCH",
            f"/repos/{inp.repo}/git/refs/heads/{quote(inp.branch)}",
            input={"sha": commit, "force": True},
        )


def _find_pull_request(gh: Github, inp: PullRequestInput) -> dict[str, Any] | None:
    """The pull request whose head is the branch, in any state (an open one first)."""
    owner = inp.repo.split("/", 1)[0]
    found = _request(
        gh,
        "GET",
        f"/repos/{inp.repo}/pulls",
        parameters={"state": "all", "head": f"{owner}:{inp.branch}", "per_page": 100},
    )
    pulls = [p for p in found or [] if isinstance(p, dict)]
    pulls.sort(key=lambda p: (p.get("state") == "open", int(p["number"])), reverse=True)
    return pulls[0] if pulls else None


def _pull_request(gh: Github, inp: PullRequestInput) -> tuple[int, str]:
    pull = _find_pull_request(gh, inp)
    if pull is None:
        try:
            pull = _request(
                gh,
                "POST",
                f"/repos/{inp.repo}/pulls",
                input={
                    "title": inp.title,
                    "body": inp.body,
                    "head": inp.branch,
                    "base": inp.base,
                    "draft": True,
                },
            )
        except GithubException as exc:
            if not _already_exists(exc):
                raise
            pull = _find_pull_request(gh, inp)  # opened by an attempt whose answer was lost
            if pull is None:
                raise ApplicationError(
                    f"GitHub says a pull request for {inp.branch} exists on {inp.repo} but lists none",
                    type=ErrorType.GITHUB_SERVER_ERROR,
                ) from exc
    return int(pull["number"]), str(pull["html_url"])
