"""Approvals voided in a task's history, and what its MCP servers said at its start.

A pull request's approval is bound to the diff it showed. When the workspace changed while
the person decided, the task voids the approval (nothing is opened with it) and asks again
for the new diff. The history holds what it takes to say so: the approved request with its
diff's hash, then the task's own `code.diff` with the hash it found. Pure: no client calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from surfaces.timeline_entries import EntryKind
from workflows.code_types import CodeToolInput, CodeToolResult
from workflows.mcp_types import McpListResult
from workflows.message_types import ResolveApprovalRequestInput


@dataclass(frozen=True)
class _Approved:
    tool: str
    diff_sha256: str
    by: str | None


class VoidedApprovals:
    """Watches a history for an approved diff that the workspace no longer held."""

    def __init__(self) -> None:
        self._approved: _Approved | None = None

    def decided(self, decided: ResolveApprovalRequestInput) -> None:
        sha = decided.request.arguments.get("diff_sha256")
        self._approved = None
        if decided.outcome == "approved" and sha:
            self._approved = _Approved(decided.request.tool, str(sha), decided.decided_by)

    def diffed(self, inp: CodeToolInput | None, out: CodeToolResult | None) -> str | None:
        """What was voided and why, when this `code.diff` is the check after an approval that
        found another diff; None otherwise."""
        approved = self._approved
        if approved is None or inp is None or inp.call.tool != "code.diff":
            return None
        self._approved = None  # the first diff after the decision is the task's check
        now = out.diff.sha256 if out is not None and out.diff is not None else ""
        if now == approved.diff_sha256:
            return None
        by = f" by {approved.by}" if approved.by else ""
        found = f"now {now[:12]}" if now else "now no changes"
        return (
            f"the approval of {approved.tool}{by} is void: the workspace changed after it was "
            f"requested (approved diff {approved.diff_sha256[:12]}, {found}), so nothing was done with it"
        )


class _Told(Protocol):
    kind: EntryKind
    what: str


def tell_what_followed(entries: Sequence[_Told], voided: Sequence[_Told]) -> None:
    """Add to each voided approval's entry what the task did next: asked again for the new
    diff, or stopped."""
    for index, entry in enumerate(entries):
        if not any(entry is void for void in voided):
            continue
        tool = entry.what.removeprefix("the approval of ").split(" ", 1)[0]
        for later in entries[index + 1 :]:
            if (
                later.kind is EntryKind.APPROVAL
                and later.what.startswith("asked ")
                and later.what.endswith(tool)
            ):
                entry.what += "; then it asked again, for the new diff"
                break
            if later.kind is EntryKind.STOP:
                entry.what += f"; then the task stopped ({later.what})"
                break


def mcp_problems(listed: McpListResult | None) -> list[str]:
    """Each MCP server the task could not list at its start, with why."""
    if listed is None:
        return []
    return [
        f"MCP server {status.name} unavailable, its tools not offered: {status.problem}"
        for status in listed.servers
        if not status.ok
    ]
