"""GitHub Actions tools: list_failed_runs and get_job_log, for CI investigations.

Only the end of a job log is downloaded and shown; everything read is stripped of hidden
content and bounded before the model sees it.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import requests
from github import Github

from activities.github.client import REQUEST_TIMEOUT_SECONDS, bounded, check_repo, github_call, strip_hidden
from activities.runtime import Runtime
from activities.tools.native import NonEmpty, PositiveInt, ToolArgs, native_tool
from workflows.types import ToolCallInput

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


class FailedRunsArgs(ToolArgs):
    repo: NonEmpty
    branch: NonEmpty | None = None


class JobLogArgs(ToolArgs):
    repo: NonEmpty
    job_id: PositiveInt
    tail_lines: PositiveInt = DEFAULT_TAIL_LINES


@native_tool(
    "github.list_failed_runs",
    FailedRunsArgs,
    "List recent failed workflow runs of a repository, optionally for one branch.",
    permission="actions:read",
    writes=False,
)
async def list_failed_runs(args: FailedRunsArgs, inp: ToolCallInput, rt: Runtime) -> str:
    repo = check_repo(args.repo)
    branch = (args.branch or "").strip()

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


@native_tool(
    "github.get_job_log",
    JobLogArgs,
    "Read the tail of a workflow job's log (bounded).",
    permission="actions:read",
    writes=False,
)
async def get_job_log(args: JobLogArgs, inp: ToolCallInput, rt: Runtime) -> str:
    repo = check_repo(args.repo)
    job_id = args.job_id
    tail_lines = min(args.tail_lines, MAX_TAIL_LINES)

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
