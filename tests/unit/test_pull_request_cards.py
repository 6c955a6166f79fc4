"""A draft pull request's approval, as each surface shows it: the Slack card, the GitHub
comment and the CLI say what a reviewer decides on (repository and base, the diff's stat,
tests before and after, model and cost so far, the start of the patch, the command for all of
it), within each one's limits; any other tool's request shows its arguments as before."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console

from activities.github.approval_card import approval_body, resolved_body, shows_decision
from activities.slack import blocks
from surfaces.cli.approval_view import diff_text, print_request, what_is_asked
from workflows.code_text import describe_tests
from workflows.code_types import TestRun as Run  # "Test…" would be collected
from workflows.pull_request_card import PREVIEW_LIMIT, PullRequestCard
from workflows.types import ApprovalRequest, ResolveApprovalRequestInput, SurfaceContext

PATCH = (
    "diff --git a/calc.py b/calc.py\n"
    "--- a/calc.py\n"
    "+++ b/calc.py\n"
    "@@ -1,2 +1,2 @@\n"
    " def mean(values):  # <values> & ```n```\n"
    "-    return sum(values) / (len(values) + 1)\n"
    "+    return sum(values) / len(values)\n"
)
PREVIEW = "1 file(s) changed, 1 insertion(s)(+), 1 deletion(s)(-): calc.py\n\n" + PATCH


def _arguments(**overrides: object) -> dict[str, object]:
    values: dict[str, object] = {
        "title": "Fix calc.mean",
        "body": "Divide by **n**, not n + 1.",
        "repo": "acme/api",
        "base": "main",
        "diff": "1 file(s) changed, +1 −1",
        "diff_sha256": "ab" * 32,
        "diff_preview": PREVIEW,
        "full_diff": "openloop tasks diff task-code-1",
        "tests_before": "failed: 1 failing (tests/test_calc.py::test_mean)",
        "tests_after": "passed (3 passed)",
        "cost_so_far_usd": 0.0123,
    }
    values.update(overrides)
    return values


def _request(tool: str = "github.create_pull_request", **arguments: object) -> ApprovalRequest:
    return ApprovalRequest(
        "apr-task-code-1-5-c5",
        "a" * 32,
        tool,
        _arguments(**arguments) if tool == "github.create_pull_request" else dict(arguments),
        ["U_APPROVER", "cli:local"],
        "2025-01-02T10:00:00+00:00",
        "2025-01-05T10:00:00+00:00",
        "openai/gpt-4o-mini",
        0.0004,
    )


def _card(message: tuple[str, list[dict[str, object]]]) -> tuple[str, list[dict[str, Any]]]:
    text, card = message
    return text, [dict(block) for block in card]


def _texts(blocks_: list[dict[str, Any]]) -> str:
    return json.dumps(blocks_, ensure_ascii=False)


def _block_texts(block: dict[str, Any]) -> list[str]:
    texts = [block["text"]["text"]] if isinstance(block.get("text"), dict) else []
    texts += [field["text"] for field in block.get("fields", [])]
    return texts


# The card's facts ----------------------------------------------------------------------------


def test_the_card_reads_the_proposal_and_only_a_complete_one() -> None:
    card = PullRequestCard.of(_request())
    assert card is not None
    assert (card.repo, card.base, card.diff, card.short_sha) == (
        "acme/api",
        "main",
        "1 file(s) changed, +1 −1",
        "ab" * 6,
    )
    assert (card.cost, card.model, card.one_line()) == (
        "$0.0123",
        "openai/gpt-4o-mini",
        f"acme/api → main: 1 file(s) changed, +1 −1 (diff {'ab' * 6})",
    )
    assert PullRequestCard.of(_request("github.create_issue", title="x", diff_sha256="ab")) is None
    assert PullRequestCard.of(_request(diff_sha256="")) is None  # not made by the task


def test_a_long_preview_is_cut_at_a_line_and_says_so() -> None:
    lines = "".join(f"+line {n:05d}\n" for n in range(1000))
    shown = PullRequestCard.of(_request(diff_preview=lines))
    assert shown is not None
    preview = shown.shown_preview()
    assert len(preview) <= PREVIEW_LIMIT and preview.endswith("\n…")
    assert all(line.startswith("+line ") for line in preview.splitlines()[:-1])


def test_tests_that_disappeared_are_shown_as_gone_on_every_card() -> None:
    before = Run(passed=False, failing=["t::test_a", "t::test_b"], summary="2 failed", ran=6)
    after = Run(passed=True, failing=[], summary="4 passed", ran=4)
    shown = describe_tests(after, True, before)
    assert shown == "passed (4 passed, 2 fewer than before: t::test_a, t::test_b gone)"
    assert describe_tests(Run(passed=True, summary="6 passed", ran=6), True, before) == "passed (6 passed)"
    assert describe_tests(after) == "passed (4 passed)"  # nothing to compare with
    request = _request(tests_after=shown)
    _, card = _card(blocks.approval_request_message("task-code-1", "coder", request))
    assert f"*Tests after*\n{shown}" in [field["text"] for field in card[3]["fields"]]
    assert f"- Tests after: {shown}\n" in approval_body("task-code-1", "coder", request)
    out = io.StringIO()
    print_request(Console(file=out, width=200), request)
    assert "2 fewer than before: t::test_a, t::test_b gone" in out.getvalue()


# Slack ---------------------------------------------------------------------------------------


def test_the_slack_card_shows_the_summary_the_patch_and_a_show_diff_button() -> None:
    text, card = _card(blocks.approval_request_message("task-code-1", "coder", _request()))
    shown = _texts(card)
    assert [b["type"] for b in card] == [
        "header",
        "section",
        "section",
        "section",
        "rich_text",
        "section",
        "context",
        "actions",
        "context",
    ]
    assert "*coder* wants to open a draft pull request" in shown and "*Fix calc.mean*" in shown
    assert "Divide by *n*, not n + 1." in shown  # the body as mrkdwn
    fields = [field["text"] for field in card[3]["fields"]]
    assert fields == [
        "*Repository*\n`acme/api` → `main`",
        f"*Diff*\n1 file(s) changed, +1 −1\n`{'ab' * 6}`",
        "*Tests before*\nfailed: 1 failing (tests/test_calc.py::test_mean)",
        "*Tests after*\npassed (3 passed)",
        "*Model*\n`openai/gpt-4o-mini`",
        "*Cost so far*\n$0.0123",
    ]
    # The patch verbatim: preformatted text is not mrkdwn, so nothing in it is escaped.
    [[element]] = [b["elements"] for b in card if b["type"] == "rich_text"]
    assert element["type"] == "rich_text_preformatted"
    assert element["elements"][0]["text"] == PREVIEW.rstrip("\n")
    assert "`openloop tasks diff task-code-1`" in shown and "*Show diff*" in shown
    [actions] = [b for b in card if b["type"] == "actions"]
    names = [(e["text"]["text"], e["action_id"]) for e in actions["elements"]]
    assert names == [
        ("Approve", blocks.APPROVE_ACTION),
        ("Deny", blocks.DENY_ACTION),
        ("Show diff", blocks.SHOW_DIFF_ACTION),
    ]
    assert len({e["value"] for e in actions["elements"]}) == 1
    assert '"arguments"' not in shown and "*Arguments*" not in shown
    assert "github.create_pull_request" in text


def test_the_slack_card_stays_within_slacks_limits_with_a_huge_proposal() -> None:
    huge = _request(
        title="T" * 400,
        body="word " * 2000,
        tests_before="failed: " + "x" * 3000,
        diff_preview="+" + "y" * 9000 + "\n",
    )
    _, card = _card(blocks.approval_request_message("task-code-1", "coder", huge))
    for block in card:
        assert all(len(text) <= blocks.SECTION_LIMIT for text in _block_texts(block))
        for field in block.get("fields", []):
            assert len(field["text"]) <= 2000
    [[element]] = [b["elements"] for b in card if b["type"] == "rich_text"]
    assert len(element["elements"][0]["text"]) <= PREVIEW_LIMIT


def test_the_resolved_slack_card_keeps_the_summary_without_buttons() -> None:
    _, card = _card(
        blocks.approval_resolved_message(
            "task-code-1", "coder", _request(), "approved", "U_APPROVER", "2025-01-02T11:00:00+00:00"
        )
    )
    types = [b["type"] for b in card]
    assert "actions" not in types and "rich_text" in types
    shown = _texts(card)
    assert "✅ Approved" in shown and "<@U_APPROVER>" in shown and "$0.0123" in shown
    assert "*Show diff*" not in shown and "`openloop tasks diff task-code-1`" in shown


def test_other_tools_keep_their_arguments_card() -> None:
    _, card = _card(
        blocks.approval_request_message("t", "helper", _request("github.create_issue", title="Bug"))
    )
    shown = _texts(card)
    assert "*Arguments*" in shown and "wants to run `github.create_issue`" in shown
    assert blocks.SHOW_DIFF_ACTION not in shown and "rich_text" not in shown
    assert "*Estimated cost*\\n$0.0004" in shown


# GitHub --------------------------------------------------------------------------------------


def test_the_github_comment_shows_the_summary_and_the_patch_in_a_fence_it_cannot_close() -> None:
    body = approval_body("task-code-1", "coder", _request())
    assert body.startswith("**Approval needed**: agent `coder` wants to open a draft pull request")
    assert not shows_decision(body)
    assert "**Fix calc.mean**\n\n> Divide by **n**, not n + 1.\n" in body
    assert "- Repository: `acme/api` → `main`\n" in body
    assert f"- Diff: 1 file(s) changed, +1 −1 (`{'ab' * 6}`)\n" in body
    assert "- Tests before: failed: 1 failing (tests/test_calc.py::test_mean)\n" in body
    assert "- Tests after: passed (3 passed)\n" in body
    assert "- Model: `openai/gpt-4o-mini` · cost so far: $0.0123" in body
    # The patch holds a run of three backticks: the fence is longer.
    assert f"````diff\n{PREVIEW.rstrip()}\n````\n" in body
    assert "all of it: `openloop tasks diff task-code-1`" in body
    assert body.endswith(
        "Approve with `openloop approve task-code-1` or deny with `openloop deny task-code-1`."
    )
    assert '"diff_sha256"' not in body


def test_the_resolved_github_comment_says_who_decided_and_what() -> None:
    decided = ResolveApprovalRequestInput(
        "task-code-1",
        SurfaceContext("github", "acme/api", "alice", thread="1"),
        _request(),
        "issue:1",
        "denied",
        "alice",
        "2025-01-02T11:00:00+00:00",
    )
    body = resolved_body("task-code-1", decided)
    assert body.startswith("**Approval denied** by `alice` at 2025-01-02T11:00:00+00:00")
    assert shows_decision(body) and "- Tests after: passed (3 passed)" in body and "```" not in body


def test_other_tools_keep_their_json_comment() -> None:
    body = approval_body("t", "helper", _request("github.create_issue", title="Bug"))
    assert '```json\n{\n  "title": "Bug"\n}\n```' in body and "estimated cost: $0.0004" in body


# CLI -----------------------------------------------------------------------------------------


def _printed(request: ApprovalRequest) -> str:
    out = Console(file=io.StringIO(), width=200, color_system=None)
    print_request(out, request)
    return out.file.getvalue()  # type: ignore[attr-defined]


def test_the_cli_shows_the_pull_request_and_leaves_other_tools_as_they_were() -> None:
    printed = _printed(_request())
    assert "  title: Fix calc.mean\n  repository: acme/api → main\n" in printed
    assert "  tests: failed: 1 failing (tests/test_calc.py::test_mean) → passed (3 passed)\n" in printed
    assert "  model: openai/gpt-4o-mini; cost so far $0.0123\n" in printed
    assert "+    return sum(values) / len(values)\n" in printed
    assert printed.endswith("  the whole diff: openloop tasks diff task-code-1\n")
    assert what_is_asked(_request()) == f"acme/api → main: 1 file(s) changed, +1 −1 (diff {'ab' * 6})"
    other = _request("github.create_issue", title="[bold]")
    assert _printed(other) == "" and what_is_asked(other) == "{'title': '\\[bold]'}"  # markup escaped


def test_a_patch_is_coloured_like_git_diff() -> None:
    spans = {
        str(diff_text(PATCH)[span.start : span.end]).rstrip("\n"): span.style
        for span in diff_text(PATCH).spans
    }
    assert spans["diff --git a/calc.py b/calc.py"] == "bold"
    assert spans["@@ -1,2 +1,2 @@"] == "cyan"
    assert spans["-    return sum(values) / (len(values) + 1)"] == "red"
    assert spans["+    return sum(values) / len(values)"] == "green"
    assert spans["+++ b/calc.py"] == "bold"
