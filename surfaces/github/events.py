"""Pure parsing of GitHub webhook payloads into trigger decisions (no I/O, unit-tested).

`decide(event, payload, config)` says what a delivery means for the agent bound to its
repository: start a task (`Trigger`), hand a comment to a task waiting in that thread
(`FollowUp`), or nothing (`Ignore`, with the reason). Comment text is stripped of hidden
content (HTML comments, invisible characters) here, before it can reach a model.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from activities.github.client import MARKER_PREFIX, bounded, strip_hidden
from config.surfaces import GitHubSurface
from workflows.untrusted import wrap_untrusted

COMMENT_EVENTS = ("issue_comment", "pull_request_review_comment")
HANDLED_EVENTS = (*COMMENT_EVENTS, "workflow_run", "check_suite")
FAILED_CONCLUSIONS = ("failure", "timed_out", "startup_failure")
MAX_REQUEST = 8_000
MAX_DIFF_LINES = 20
_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.S | re.M)
# A code span: a run of backticks to the next run of the same length, across line breaks
# but not across a blank line (the end of a paragraph), as CommonMark reads it.
_INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)(?:(?!\n[ \t]*\n).)+?(?<!`)\1(?!`)", re.S)


@dataclass(frozen=True)
class Trigger:
    """Start a task."""

    repo: str
    user: str
    request: str
    task_kind: str  # chat | investigate_ci
    thread: str | None = None  # issue/PR number
    head_sha: str | None = None  # CI: the commit the run was for
    reaction_path: str | None = None  # e.g. "issues/comments/123", to acknowledge with 👀


@dataclass(frozen=True)
class FollowUp:
    """An allowed user's comment: an answer if a task in this thread is waiting for one."""

    repo: str
    user: str
    thread: str
    text: str


@dataclass(frozen=True)
class Ignore:
    reason: str


Decision = Trigger | FollowUp | Ignore


def verify_signature(secret: bytes, body: bytes, header: str | None) -> bool:
    """X-Hub-Signature-256: `sha256=` + HMAC-SHA256 of the raw body, compared in constant time."""
    if not secret or not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode())


def repo_of(payload: dict[str, Any]) -> str | None:
    repository = payload.get("repository")
    name = repository.get("full_name") if isinstance(repository, dict) else None
    return name if isinstance(name, str) and "/" in name else None


def _handle(config: GitHubSurface) -> str:
    return config.handle.lstrip("@")


def mentions(text: str, handle: str) -> bool:
    """`@handle` outside code and quoted lines (a quoted earlier mention is not a new request)."""
    visible = _INLINE_CODE.sub("", _FENCE.sub("", text))
    lines = [line for line in visible.splitlines() if not line.lstrip().startswith(">")]
    pattern = re.compile(rf"(?<![\w@/.-])@{re.escape(handle)}(?![\w-])", re.I)
    return any(pattern.search(line) for line in lines)


def _is_bot(user: dict[str, Any]) -> bool:
    return user.get("type") == "Bot" or str(user.get("login", "")).endswith("[bot]")


def _bot_name(login: str) -> str:
    return login.lower().removesuffix("[bot]")


def author_allowed(comment: dict[str, Any], config: GitHubSurface) -> str | None:
    """None when the comment's author may trigger the agent, else the reason they may not."""
    user = comment.get("user") or {}
    login = str(user.get("login") or "")
    if _is_bot(user):
        if _bot_name(login) in {_bot_name(b) for b in config.allowed_bots}:
            return None
        return f"{login} is a bot not listed in allowed_bots"
    association = str(comment.get("author_association") or "NONE").upper()
    if association not in {a.upper() for a in config.allowed_associations}:
        return f"{login} is {association}, not one of {', '.join(config.allowed_associations)}"
    return None


def _comment_decision(event: str, payload: dict[str, Any], config: GitHubSurface) -> Decision:
    if payload.get("action") != "created":
        return Ignore(f"comment {payload.get('action')}: only new comments are read")
    comment = payload.get("comment")
    target = payload.get("issue") if event == "issue_comment" else payload.get("pull_request")
    if not isinstance(comment, dict) or not isinstance(target, dict) or "number" not in target:
        raise ValueError(f"{event} payload without comment or issue/pull_request")
    raw = str(comment.get("body") or "")
    if MARKER_PREFIX in raw:
        return Ignore("a comment this agent wrote")
    refused = author_allowed(comment, config)
    if refused:
        return Ignore(refused)
    repo = repo_of(payload) or ""
    login = str((comment.get("user") or {}).get("login") or "")
    number = str(target["number"])
    text = strip_hidden(raw)
    if not mentions(text, _handle(config)):
        return FollowUp(repo=repo, user=login, thread=number, text=bounded(text, MAX_REQUEST))
    is_pr = event == "pull_request_review_comment" or "pull_request" in target
    kind = "pull request" if is_pr else "issue"
    title = strip_hidden(str(target.get("title") or ""))
    # No "@" before the login: a reply quoting the request must not ping the person again.
    # The title and the diff come from whoever wrote the issue or the change: data, never
    # instructions. The comment is the request of someone allowed to ask.
    lines = [
        f"{login} mentioned you on {kind} {repo}#{number}, titled:",
        wrap_untrusted(title, f"github:{kind.replace(' ', '_')}_title"),
        "",
    ]
    if event == "pull_request_review_comment":
        hunk = str(comment.get("diff_hunk") or "").splitlines()[-MAX_DIFF_LINES:]
        lines += [
            f"(review comment on {comment.get('path')} line {comment.get('line')}; the diff:)",
            wrap_untrusted("\n".join(strip_hidden(line) or " " for line in hunk), "github:diff_hunk"),
            "",
        ]
    lines.append(bounded(text, MAX_REQUEST))
    reaction = "pulls/comments" if event == "pull_request_review_comment" else "issues/comments"
    return Trigger(
        repo=repo,
        user=login,
        request="\n".join(lines),
        task_kind="chat",
        thread=number,
        reaction_path=f"{reaction}/{comment['id']}" if comment.get("id") else None,
    )


def branch_watched(branch: str | None, config: GitHubSurface) -> bool:
    return bool(branch) and any(fnmatch.fnmatchcase(str(branch), p) for p in config.ci.branches)


def ci_request(
    repo: str,
    what: str,
    branch: str,
    sha: str,
    url: str,
    pr: int | None,
    detail: str = "",
    propose_fix: bool = False,
) -> str:
    """The request an 'investigate CI' task starts with."""
    on_pr = f" (pull request #{pr})" if pr else ""
    lines = [f"CI failed in {repo}: {what} on branch {branch}{on_pr} at commit {sha[:12]}."]
    lines += [f"Run: {url}"] if url else []
    lines += [detail] if detail else []
    lines += [
        "",
        "Investigate the failure:",
        f"1. github.list_failed_runs(repo={repo!r}, branch={branch!r}) to find this run's "
        "failed jobs and failed steps;",
        "2. github.get_job_log for each failed job (the tail is enough) to read the error;",
        "3. name the failing job and step, the failing test(s) or command, and the likely cause.",
        "Reply with a short report: what failed, where (file/test), the likely cause, and a "
        "suggested fix. Quote at most a few log lines. Do not guess beyond what the logs show.",
    ]
    if propose_fix:
        lines += [
            "",
            "If the likely cause is in this repository's code, fix it: "
            f"code.open_workspace(repo={repo!r}, base={branch!r}), reproduce the failure with "
            "code.run_tests, change what the fix needs with code.edit_file, run code.run_tests "
            "again, and when the tests pass propose the change with github.create_pull_request "
            "(its body names the failed run). A person approves it before anything is pushed. "
            "If the cause is not in the code (an outage, a secret, a flaky runner), say so and "
            "propose nothing.",
        ]
    return "\n".join(lines)


def _first_pr(item: dict[str, Any]) -> int | None:
    prs = item.get("pull_requests") or []
    number = prs[0].get("number") if prs and isinstance(prs[0], dict) else None
    return int(number) if number else None


def _ci_decision(event: str, payload: dict[str, Any], config: GitHubSurface) -> Decision:
    key = "workflow_run" if event == "workflow_run" else "check_suite"
    item = payload.get(key)
    if not isinstance(item, dict):
        raise ValueError(f"{event} payload without {key}")
    if payload.get("action") != "completed":
        return Ignore(f"{event} {payload.get('action')}: only completed runs are investigated")
    if item.get("conclusion") not in FAILED_CONCLUSIONS:
        return Ignore(f"{event} concluded {item.get('conclusion')}")
    if not config.ci.enabled:
        return Ignore("CI investigation is not enabled for this agent (spec.surfaces.github.ci)")
    repo = repo_of(payload) or ""
    branch = str(item.get("head_branch") or "")
    if not branch_watched(branch, config):
        return Ignore(f"branch {branch or '(none)'} is not in ci.branches")
    sha = str(item.get("head_sha") or "")
    pr = _first_pr(item)
    if event == "workflow_run":
        head_repo = (item.get("head_repository") or {}).get("full_name")
        if head_repo and str(head_repo).lower() != repo.lower():
            # A fork's run: its logs are written by whoever opened the pull request.
            return Ignore(f"run from the fork {head_repo}")
        name = strip_hidden(str(item.get("name") or "")).strip()
        what = f"workflow '{name}' run" if name else "workflow run"
        what += f" #{item.get('run_number')}"
        detail = f"Run id {item.get('id')}, attempt {item.get('run_attempt', 1)}, event {item.get('event')}."
        url = str(item.get("html_url") or "")
        actor = str((item.get("actor") or {}).get("login") or "github")
    else:
        app = item.get("app") or {}
        if app.get("slug") == "github-actions":
            return Ignore("GitHub Actions check suite: investigated from its workflow_run event")
        what = f"check suite from {app.get('name') or app.get('slug') or 'a CI app'}"
        detail = f"Check suite id {item.get('id')}; its logs may live outside GitHub Actions."
        url = ""
        actor = str((payload.get("sender") or {}).get("login") or "github")
    return Trigger(
        repo=repo,
        user=actor,
        request=ci_request(repo, what, branch, sha, url, pr, detail, config.ci.propose_fixes),
        task_kind="investigate_ci",
        thread=str(pr) if pr else None,
        head_sha=sha or None,
    )


def decide(event: str, payload: dict[str, Any], config: GitHubSurface) -> Decision:
    """What a delivery means for the agent bound to its repository. Raises ValueError when
    the payload lacks what its event must carry (a malformed delivery)."""
    if event in ("issue_comment", "pull_request_review_comment"):
        return _comment_decision(event, payload, config)
    if event in ("workflow_run", "check_suite"):
        return _ci_decision(event, payload, config)
    return Ignore(f"event {event!r} is not handled")
