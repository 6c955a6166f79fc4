"""What a person approving a draft pull request is shown: the repository and base, the diff's
stat, the tests before and after, what the sandbox's network allowlist refused its commands,
the model and the cost so far, the start of the patch and the command that prints all of it.

The task puts these in the approval request's arguments (`TaskWorkspace.proposal`); this
module reads them back, so the Slack card, the GitHub comment and the CLI say the same
things, each in its own markup. Pure; any other tool's arguments are shown as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from workflows.code_types import CREATE_PULL_REQUEST
from workflows.message_types import ApprovalRequest

# The preview is cut to this in every surface: Slack's blocks hold 3000 characters, and a
# longer start of the patch reads no better anywhere else.
PREVIEW_LIMIT = 2500
BODY_LIMIT = 600
BLOCKED_LIMIT = 10  # lines; the task already caps what it sends (`workflows.egress_blocked`)
BLOCKED_CHARS = 300  # per line


def _lines(value: object) -> tuple[str, ...]:
    """The blocked lines the task sent; anything else (an older or hand-made request) is none."""
    if not isinstance(value, list):
        return ()
    return tuple(line[:BLOCKED_CHARS] for line in value if isinstance(line, str))


@dataclass(frozen=True)
class PullRequestCard:
    title: str
    body: str
    repo: str
    base: str
    diff: str  # the stat: "1 file(s) changed, +1 −1"
    diff_sha256: str
    preview: str  # the start of the patch
    full_diff: str  # the command that prints the whole diff
    tests_before: str
    tests_after: str
    cost_usd: float | None
    model: str
    blocked: tuple[str, ...] = ()  # what the sandbox's network allowlist refused its commands

    @classmethod
    def of(cls, request: ApprovalRequest) -> PullRequestCard | None:
        """The card of a pull request's approval; None for any other tool, or for arguments
        the task did not complete (they are then shown as they are)."""
        args = request.arguments
        if request.tool != CREATE_PULL_REQUEST or not args.get("diff_sha256"):
            return None
        cost = args.get("cost_so_far_usd")

        def text(key: str) -> str:
            value = args.get(key)
            return "" if value is None else str(value)

        return cls(
            title=text("title"),
            body=text("body"),
            repo=text("repo"),
            base=text("base"),
            diff=text("diff"),
            diff_sha256=text("diff_sha256"),
            preview=text("diff_preview"),
            full_diff=text("full_diff"),
            tests_before=text("tests_before") or "not run",
            tests_after=text("tests_after") or "not run",
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            model=request.model,
            blocked=_lines(args.get("blocked")),
        )

    def shown_blocked(self, limit: int = BLOCKED_LIMIT) -> list[str]:
        """`blocked: evil.example:443 from `pytest` ×3 (not in the allowlist)`, at most `limit`."""
        shown = list(self.blocked[:limit])
        if len(self.blocked) > limit:
            shown.append(f"… and {len(self.blocked) - limit} more lines")
        return shown

    @property
    def cost(self) -> str:
        return "unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"

    @property
    def short_sha(self) -> str:
        return self.diff_sha256[:12]

    def shown_preview(self, limit: int = PREVIEW_LIMIT) -> str:
        """The start of the patch within `limit` characters, cut at a line ("…" marks a cut)."""
        preview = self.preview.rstrip("\n")
        if len(preview) <= limit:
            return preview
        cut = preview.rfind("\n", 0, limit - 2)
        return preview[: cut if cut > 0 else limit - 2] + "\n…"

    def short_body(self, limit: int = BODY_LIMIT) -> str:
        body = self.body.strip()
        return body if len(body) <= limit else body[: limit - 1].rstrip() + "…"

    def one_line(self) -> str:
        """For a line in a log or a terminal: where it goes and how big it is."""
        return f"{self.repo} → {self.base}: {self.diff} (diff {self.short_sha})"
