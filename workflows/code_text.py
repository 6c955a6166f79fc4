"""Words of a coding task: how a test run reads, where a task came from, and the body of the
draft pull request it opens. Pure functions."""

from __future__ import annotations

import re

from workflows.code_types import TestRun, WorkspaceState
from workflows.loop_types import DiffSnapshot
from workflows.task_basics import SurfaceContext

_RUN_URL = re.compile(r"^Run: (https?://\S+)$", re.M)
_SHOWN_FAILURES = 5


def describe_tests(run: TestRun | None, configured: bool = True) -> str:
    if run is None:
        return "not run" if configured else "not run (no test command is configured: spec.coding.verify)"
    if run.passed:
        return f"passed ({run.summary})" if run.summary else "passed"
    failing = run.failing or []
    named = ", ".join(failing[:_SHOWN_FAILURES]) + (" …" if len(failing) > _SHOWN_FAILURES else "")
    return f"failed: {len(failing)} failing ({named})" if failing else f"failed: {run.summary[:200]}"


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
    return "\n".join(
        [
            summary.strip() or "A fix proposed by an OpenLoop coding task.",
            "",
            "---",
            f"- Tests before: {describe_tests(state.tests_before, configured)}",
            f"- Tests after: {describe_tests(state.tests_after, configured)}",
            f"- Diff: {describe_diff(diff)} (sha256 `{diff.sha256[:16]}`)",
            f"- Started from: {where}",
            f"- Made by OpenLoop task `{task_id}`; model cost so far ${cost_usd:.4f}.",
        ]
    )
