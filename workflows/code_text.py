"""Words of a coding task: how a test run reads, where a task came from, and the body of the
draft pull request it opens. Pure functions."""

from __future__ import annotations

import re

from workflows.code_types import TestRun, WorkspaceState
from workflows.loop_types import DiffSnapshot, Sandbox
from workflows.task_basics import SurfaceContext

_RUN_URL = re.compile(r"^Run: (https?://\S+)$", re.M)
_SHOWN_FAILURES = 5


def describe_tests(run: TestRun | None, configured: bool = True, before: TestRun | None = None) -> str:
    """How a test run went; against the run `before` it, how many fewer tests ran and which."""
    if run is None:
        return "not run" if configured else "not run (no test command is configured: spec.coding.verify)"
    fewer = fewer_tests(before, run)
    if run.passed:
        shown = ", ".join(part for part in (run.summary, fewer) if part)
        return f"passed ({shown})" if shown else "passed"
    failing = run.failing or []
    named = ", ".join(failing[:_SHOWN_FAILURES]) + (" …" if len(failing) > _SHOWN_FAILURES else "")
    said = f"failed: {len(failing)} failing ({named})" if failing else f"failed: {run.summary[:200]}"
    return f"{said}; {fewer}" if fewer else said


def describe_sandbox(sandbox: Sandbox) -> str:
    """Where the workspace's commands run, as the model is told when it opens one."""
    if sandbox.provider == "none":
        return "unconfined (no sandbox), with the worker's network"
    if sandbox.network is True:
        return "in a sandbox with the worker's network"
    if sandbox.network:
        return f"in a sandbox whose network reaches only {', '.join(sandbox.network)} (through a proxy)"
    return "in a sandbox without network"


def fewer_tests(before: TestRun | None, after: TestRun) -> str:
    """How many fewer tests ran than before ("2 fewer than before"), naming the tests that
    failed before and no longer do when the missing count accounts for them: they did not
    pass, they did not run. Empty when as many ran, or either run did not say how many."""
    if before is None or before.ran is None or after.ran is None or after.ran >= before.ran:
        return ""
    missing = before.ran - after.ran
    stopped = sorted(set(before.failing or []) - set(after.failing or []))
    if stopped and len(stopped) <= missing:
        shown = ", ".join(stopped[:_SHOWN_FAILURES]) + (" …" if len(stopped) > _SHOWN_FAILURES else "")
        return f"{missing} fewer than before: {shown} gone"
    return f"{missing} fewer than before"


def describe_diff(diff: DiffSnapshot) -> str:
    return f"{diff.files_changed} file(s) changed, +{diff.insertions} −{diff.deletions}"


def origin(context: SurfaceContext, request: str) -> str:
    """Where the task started, as a link a reviewer can follow."""
    if context.surface == "github" and "/" in context.channel:
        run = _RUN_URL.search(request)
        if run:
            return f"CI run {run.group(1)}"
        if context.thread:
            return f"https://github.com/{context.channel}/issues/{context.thread}"
        if context.reply_target:
            return f"https://github.com/{context.channel}/commit/{context.reply_target}"
        return f"https://github.com/{context.channel}"
    if context.surface == "slack":
        if context.thread:
            return f"https://slack.com/archives/{context.channel}/p{context.thread.replace('.', '')}"
        return f"Slack channel {context.channel}"
    return f"{context.surface} ({context.channel}) by {context.user}"


def pull_request_body(
    summary: str, state: WorkspaceState, diff: DiffSnapshot, task_id: str, where: str, cost_usd: float
) -> str:
    configured = bool(state.setup.verify)
    # Like a firewall's note on a pull request: the hosts its commands could not reach.
    blocked = [f"  - {line}" for line in state.blocked.lines()] if state.blocked is not None else []
    return "\n".join(
        [
            summary.strip() or "A fix proposed by an OpenLoop coding task.",
            "",
            "---",
            f"- Tests before: {describe_tests(state.tests_before, configured)}",
            f"- Tests after: {describe_tests(state.tests_after, configured, state.tests_before)}",
            f"- Diff: {describe_diff(diff)} (sha256 `{diff.sha256[:16]}`)",
            *(["- The sandbox's network allowlist refused:", *blocked] if blocked else []),
            f"- Started from: {where}",
            f"- Made by OpenLoop task `{task_id}`; model cost so far ${cost_usd:.4f}.",
        ]
    )
