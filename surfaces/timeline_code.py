"""A coding task's workspace in its story: the workspace it opened, each `code.*` tool's
result (the tests before and after the change, the edits and the diff they left, the hosts
its commands were refused) and the draft pull request it opened, with its link.

These run as activities of their own (`openloop.loop.acquire_workspace`,
`openloop.code.run_tool` on the worker holding the workspace, `openloop.github.open_pull_request`),
not as the task's tool activity, so the story reads them here. Pure: no client calls.
"""

from __future__ import annotations

from datetime import datetime

from temporalio.api.common.v1 import Payloads
from temporalio.api.history.v1 import ActivityTaskScheduledEventAttributes

from surfaces.timeline_entries import Entry, EntryKind
from surfaces.timeline_entries import decode as _decode
from workflows import code_text
from workflows.code_types import (
    CodeActivity,
    CodeToolInput,
    CodeToolResult,
    PullRequestInput,
    PullRequestResult,
)
from workflows.egress_blocked import BlockedTally, command_blocked_lines
from workflows.loop_types import AcquireRequest, LoopActivity, WorkspaceHandle
from workflows.setup_types import setup_line

CODE_ACTIVITIES = (CodeActivity.RUN_TOOL, CodeActivity.OPEN_PULL_REQUEST, LoopActivity.ACQUIRE_WORKSPACE)
_PREVIEW = 100


class CodeSteps:
    """Reads the workspace's activities of one task, in history order."""

    def __init__(self) -> None:
        self.changed = False  # the workspace has held a change: later tests are "after"
        self.blocked = BlockedTally()  # what the network allowlist refused, as the task summed it

    def entry(
        self, attrs: ActivityTaskScheduledEventAttributes, result: Payloads, at: datetime, step: int | None
    ) -> Entry | None:
        """The entry of a finished workspace activity; `step`: the model step whose call it
        answers, when the caller knows it (the workspace opened for `code.open_workspace`)."""
        name = attrs.activity_type.name
        if name == CodeActivity.RUN_TOOL:
            inp, out = _decode(attrs.input, CodeToolInput), _decode(result, CodeToolResult)
            return None if inp is None or out is None else self._tool(inp, out, at)
        if name == CodeActivity.OPEN_PULL_REQUEST:
            asked, opened = _decode(attrs.input, PullRequestInput), _decode(result, PullRequestResult)
            if opened is None:
                return None
            what = (
                f"github.create_pull_request: ok: opened draft pull request #{opened.number}: {opened.url} "
                f"(branch {opened.branch}, commit {opened.commit[:12]})"
            )
            return Entry(at, EntryKind.TOOL, what, step=step, who=asked.approval.approver if asked else None)
        if name == LoopActivity.ACQUIRE_WORKSPACE:
            request, handle = _decode(attrs.input, AcquireRequest), _decode(result, WorkspaceHandle)
            if request is None or handle is None:
                return None
            repo = request.repo.github or request.repo.path or "the repository"
            base = f" at {request.repo.base}" if request.repo.github else ""
            did = "rebuilt the workspace of" if request.diff_sha else "code.open_workspace: ok: opened"
            what = f"{did} {repo}{base} (commit {handle.base_commit[:12]}) on {handle.worker}"
            if handle.setup is not None:  # `sandbox.setup`: ran, reused from the cache, or failed
                what += f"; {setup_line(handle.setup)}"
            return Entry(at, EntryKind.TOOL, what, step=step)
        return None

    def _tool(self, inp: CodeToolInput, out: CodeToolResult, at: datetime) -> Entry:
        tool, result = inp.call.tool, out.result
        if out.tests is not None:
            when = "after the change" if self.changed else "before any change"
            configured = bool(inp.setup.verify)
            said = f"tests {when}: {code_text.describe_tests(out.tests, configured)}"
        elif not result.ok:
            said = f"{result.error_kind or 'failed'}: {_preview(result.output)}"
        elif tool == "code.diff" and out.diff is not None:
            said = f"{code_text.describe_diff(out.diff)} (sha256 {out.diff.sha256[:12]})"
        else:
            said = f"ok: {_preview(result.output)}"
            if out.diff is not None:
                said += f"; the workspace's diff: {code_text.describe_diff(out.diff)}"
        if out.egress is not None:  # a command run with a network allowlist
            self.blocked = self.blocked.add(out.egress, inp.call.step)
            refused = command_blocked_lines(out.egress.command, out.egress.report)
            said += "".join(f"; {line}" for line in refused)
        if out.diff is not None and out.diff.files_changed:
            self.changed = True
        return Entry(at, EntryKind.TOOL, f"{tool}: {said}", step=inp.call.step)


def _preview(text: str) -> str:
    return " ".join(text.split())[:_PREVIEW]
