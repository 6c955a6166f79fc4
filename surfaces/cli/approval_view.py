"""How the CLI shows what an approval is for: a draft pull request as a reviewer reads it (the
repository and base, the diff's stat, the tests before and after, model and cost so far, the
start of the patch, coloured like `git diff` on a terminal, and the command for all of it);
any other tool's arguments as they are.

Used by `openloop ask` (following a task) and `openloop approve`; `openloop tasks diff`
prints the whole diff, coloured the same way (`diff_text`).
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from surfaces.cli.terminal import commands
from workflows.pull_request_card import PullRequestCard
from workflows.types import ApprovalRequest

_STYLES = (
    ("diff --git", "bold"),
    ("index ", "bold"),
    ("--- ", "bold"),
    ("+++ ", "bold"),
    ("@@", "cyan"),
    ("+", "green"),
    ("-", "red"),
)


def diff_text(patch: str) -> Text:
    """A patch coloured like `git diff`: file headers bold, hunks cyan, lines added green and
    removed red."""
    text = Text(no_wrap=True)
    for line in patch.splitlines(keepends=True):
        style = next((style for prefix, style in _STYLES if line.startswith(prefix)), "")
        text.append(line, style=style)
    return text


def what_is_asked(request: ApprovalRequest) -> str:
    """What follows the tool's name on one line (rich markup, escaped): for a pull request,
    where it goes and how big it is; for any other tool, its arguments."""
    card = PullRequestCard.of(request)
    return escape(str(request.arguments) if card is None else card.one_line())


def print_pull_request(out: Console, card: PullRequestCard) -> None:
    """A pull request waiting for approval, as the lines under "Approval needed"."""
    out.print(f"  title: {escape(card.title or '(no title)')}")
    out.print(f"  repository: {escape(card.repo)} → {escape(card.base)}")
    out.print(f"  diff: {escape(card.diff)} (sha256 {escape(card.short_sha)})")
    out.print(f"  tests: {escape(card.tests_before)} → {escape(card.tests_after)}")
    for line in card.shown_blocked():  # what the sandbox's network allowlist refused
        out.print(f"  [yellow]{escape(line)}[/yellow]")
    out.print(f"  model: {escape(card.model)}; cost so far {card.cost}")
    preview = card.shown_preview()
    if preview:
        out.print(diff_text(preview))
    if card.full_diff:
        out.print(f"  the whole diff: {escape(commands(card.full_diff))}")


def print_request(out: Console, request: ApprovalRequest) -> None:
    """What the request asks, under its "Approval needed" line."""
    card = PullRequestCard.of(request)
    if card is not None:
        print_pull_request(out, card)
