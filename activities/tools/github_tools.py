"""GitHub tools: create_issue, comment, get_issue, search_issues, list_failed_runs, get_job_log.

Permissions and approvals are checked by the workflow before a handler runs (see
`workflows.tool_catalog`). Writes are exactly-once per idempotency key (`activities.github.once`).
Everything read from GitHub is stripped of hidden content and bounded before the model sees it.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import requests
from github import Github

from activities.github.client import (
    REQUEST_TIMEOUT_SECONDS,
    bounded,
    check_repo,
    github_call,
    strip_hidden,
)
from activities.github.once import comment_once, create_issue_once
from activities.runtime import Runtime
from activities.tools.registry import ToolError, handler
from workflows.types import ToolCallInput

MAX_BODY = 4000  # characters of an issue body shown to the model
MAX_COMMENT = 1500
MAX_COMMENTS = 10  # the latest comments of an issue
MAX_SEARCH_RESULTS = 20
MAX_RUNS = 5
MAX_JOBS = 10  # failed jobs listed per run
LOG_TAIL_BYTES = 256 * 1024  # only the end of a job log is downloaded
MAX_LOG_BYTES = 8 * 1024 * 1024  # when the log host ignores Range, stop reading here
DEFAULT_TAIL_LINES = 150
MAX_TAIL_LINES = 500
MAX_OUTPUT = 12_000
FAILED = ("failure", "timed_out", "startup_failure")

_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")
# Lines that usually name what failed, across common test runners and build tools.
_FAILURE_LINE = re.compile(
    r"(^FAILED |^ERROR |::error|##\[error\]|--- FAIL:|^FAIL\b|\bAssertionError\b|✕|●|"
    r"\bTests? failed\b|\bError:|\bexit code [1-9]|\bTraceback \(most recent call last\))",
)


def _args(inp: ToolCallInput) -> dict[str, Any]:
    return dict(inp.arguments)


def _int(value: object, name: str) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise ToolError("invalid", f"{name} must be a whole number, not {value!r}") from None
    if number < 1:
        raise ToolError("invalid", f"{name} must be 1 or more")
    return number


@handler("github.create_issue")
async def create_issue(inp: ToolCallInput, rt: Runtime) -> str:
    args = _args(inp)
    repo = check_repo(args.get("repo"))
    title = str(args.get("title") or "").strip()
    if not title:
        raise ToolError("invalid", "an issue needs a title")
    labels = [str(label) for label in args.get("labels") or []]  # type: ignore[attr-defined]
    written = await create_issue_once(
        rt, repo, inp.idempotency_key, title, str(args.get("body") or ""), labels
    )
    verb = "Created" if written.created else "Already created"
    return f"{verb} issue #{written.number} in {repo}: {title}\n{written.url}"


@handler("github.comment")
async def comment(inp: ToolCallInput, rt: Runtime) -> str:
    args = _args(inp)
    repo = check_repo(args.get("repo"))
    number = _int(args.get("number"), "number")
    body = str(args.get("body") or "").strip()
    if not body:
        raise ToolError("invalid", "a comment needs a body")
    written = await comment_once(rt, repo, f"issue:{number}", body, inp.idempotency_key)
    return f"Commented on {repo}#{number}\n{written.url}"


def _person(item: dict[str, Any]) -> str:
    return str((item.get("user") or {}).get("login") or "unknown")


@handler("github.get_issue")
async def get_issue(inp: ToolCallInput, rt: Runtime) -> str:
    args = _args(inp)
    repo = check_repo(args.get("repo"))
    number = _int(args.get("number"), "number")

    def read(gh: Github) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        _, issue = gh.requester.requestJsonAndCheck("GET", f"/repos/{repo}/issues/{number}")
        comments: list[dict[str, Any]] = []
        total = int(issue.get("comments") or 0)
        # Comments come oldest first: the latest ones are on the last two pages.
        last_page = -(-total // MAX_COMMENTS)
        for page in range(max(1, last_page - 1), last_page + 1):
            _, batch = gh.requester.requestJsonAndCheck(
                "GET",
                f"/repos/{repo}/issues/{number}/comments",
                parameters={"per_page": MAX_COMMENTS, "page": page},
            )
            comments += batch
        return issue, comments[-MAX_COMMENTS:]

    issue, comments = await github_call(rt.settings, repo, read)
    kind = "Pull request" if "pull_request" in issue else "Issue"
    labels = ", ".join(str(label.get("name")) for label in issue.get("labels") or [])
    lines = [
        f"{kind} {repo}#{number}: {strip_hidden(str(issue.get('title') or ''))}",
        f"State: {issue.get('state')} · author: {_person(issue)} · labels: {labels or 'none'}",
        f"URL: {issue.get('html_url', '')}",
        "",
        bounded(strip_hidden(str(issue.get("body") or "(no description)")), MAX_BODY),
    ]
    if comments:
        lines += ["", f"Latest comments ({len(comments)} of {issue.get('comments')}):"]
    for item in comments:
        association = item.get("author_association", "")
        lines += [
            f"--- {_person(item)} ({association}) at {item.get('created_at', '')}:",
            bounded(strip_hidden(str(item.get("body") or "")), MAX_COMMENT),
        ]
    return bounded("\n".join(lines), MAX_OUTPUT)


@handler("github.search_issues")
async def search_issues(inp: ToolCallInput, rt: Runtime) -> str:
    args = _args(inp)
    repo = check_repo(args.get("repo"))
    query = str(args.get("query") or "").strip()
    # The search stays inside the repository the model named.
    query = re.sub(r"(?i)\b(repo|org|user):\S+", "", query).strip()

    def search(gh: Github) -> dict[str, Any]:
        _, data = gh.requester.requestJsonAndCheck(
            "GET",
            "/search/issues",
            parameters={"q": f"{query} repo:{repo}".strip(), "per_page": MAX_SEARCH_RESULTS},
        )
        return data

    data = await github_call(rt.settings, repo, search)
    items = data.get("items") or []
    if not items:
        return f"No issues in {repo} match {query!r}."
    lines = [f"{data.get('total_count', len(items))} match(es) in {repo} for {query!r}:"]
    for item in items[:MAX_SEARCH_RESULTS]:
        kind = "PR" if "pull_request" in item else "issue"
        title = strip_hidden(str(item.get("title") or ""))
        lines.append(
            f"#{item.get('number')} [{item.get('state')}] ({kind}) {title}"
            f" — {_person(item)}, updated {item.get('updated_at', '')}"
        )
    return bounded("\n".join(lines), MAX_OUTPUT)


@handler("github.list_failed_runs")
async def list_failed_runs(inp: ToolCallInput, rt: Runtime) -> str:
    args = _args(inp)
    repo = check_repo(args.get("repo"))
    branch = str(args.get("branch") or "").strip()

    def read(gh: Github) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        params: dict[str, Any] = {"status": "failure", "per_page": MAX_RUNS}
        if branch:
            params["branch"] = branch
        _, data = gh.requester.requestJsonAndCheck("GET", f"/repos/{repo}/actions/runs", parameters=params)
        runs = list(data.get("workflow_runs") or [])[:MAX_RUNS]
        found = []
        for run in runs:
            _, jobs = gh.requester.requestJsonAndCheck(
                "GET", f"/repos/{repo}/actions/runs/{run['id']}/jobs", parameters={"per_page": 100}
            )
            failed = [job for job in jobs.get("jobs") or [] if job.get("conclusion") in FAILED]
            found.append((run, failed[:MAX_JOBS]))
        return found

    found = await github_call(rt.settings, repo, read)
    where = f" on {branch}" if branch else ""
    if not found:
        return f"No failed workflow runs in {repo}{where}."
    lines = [f"Recent failed workflow runs in {repo}{where}:"]
    for run, jobs in found:
        lines.append(
            f"- run {run.get('id')} '{strip_hidden(str(run.get('name') or ''))}' #{run.get('run_number')}"
            f" on {run.get('head_branch')} @ {str(run.get('head_sha') or '')[:12]}"
            f" ({run.get('event')}, {run.get('conclusion')}, {run.get('created_at')})"
            f" {run.get('html_url', '')}"
        )
        for job in jobs:
            steps = [
                str(step.get("name")) for step in job.get("steps") or [] if step.get("conclusion") in FAILED
            ]
            lines.append(
                f"    failed job {job.get('id')} '{job.get('name')}'"
                f" — failed step: {', '.join(steps) or 'unknown'}"
            )
    lines.append("Read a job's log with github.get_job_log(repo, job_id).")
    return bounded("\n".join(lines), MAX_OUTPUT)


def _download_tail(url: str) -> str:
    """The last LOG_TAIL_BYTES of a log at a pre-signed URL (no GitHub credentials sent)."""
    headers = {"Range": f"bytes=-{LOG_TAIL_BYTES}"}
    with requests.get(url, headers=headers, stream=True, timeout=REQUEST_TIMEOUT_SECONDS) as response:
        if response.status_code == 416:  # empty log
            return ""
        response.raise_for_status()
        tail: deque[bytes] = deque()
        size = read = 0
        for chunk in response.iter_content(64 * 1024):
            tail.append(chunk)
            size += len(chunk)
            read += len(chunk)
            while size - len(tail[0]) >= LOG_TAIL_BYTES:
                size -= len(tail.popleft())
            if read >= MAX_LOG_BYTES:
                break
    return b"".join(tail)[-LOG_TAIL_BYTES:].decode("utf-8", errors="replace")


def failure_hints(lines: list[str], limit: int = 12) -> list[str]:
    """Lines that likely name the failing test or step, first occurrence of each."""
    hints: list[str] = []
    for line in lines:
        text = line.strip()
        if text and _FAILURE_LINE.search(text) and text not in hints:
            hints.append(text[:300])
    return hints[-limit:]


@handler("github.get_job_log")
async def get_job_log(inp: ToolCallInput, rt: Runtime) -> str:
    args = _args(inp)
    repo = check_repo(args.get("repo"))
    job_id = _int(args.get("job_id"), "job_id")
    tail_lines = min(_int(args.get("tail_lines") or DEFAULT_TAIL_LINES, "tail_lines"), MAX_TAIL_LINES)

    def read(gh: Github) -> str:
        status, headers, body = gh.requester.requestBlob("GET", f"/repos/{repo}/actions/jobs/{job_id}/logs")
        if status in (301, 302, 303, 307) and headers.get("location"):
            return _download_tail(str(headers["location"]))
        if status >= 400:
            raise gh.requester.createException(status, headers, {"message": body[:200]})
        return body[-LOG_TAIL_BYTES:]

    text = await github_call(rt.settings, repo, read)
    lines = [_TIMESTAMP.sub("", line) for line in strip_hidden(text).splitlines()]
    hints = failure_hints(lines)
    head = [f"Log of job {job_id} in {repo} (last {min(tail_lines, len(lines))} lines):"]
    if hints:
        head += ["Lines that look like the failure:", *(f"  {hint}" for hint in hints), "---"]
    header = "\n".join(head)
    tail = "\n".join(lines[-tail_lines:])
    room = MAX_OUTPUT - len(header) - 1
    # Keep the end of the log, where the failure is, when the output must be cut.
    if len(tail) > room:
        tail = "… (cut)\n" + tail[-(room - 8) :]
    return f"{header}\n{tail}"
