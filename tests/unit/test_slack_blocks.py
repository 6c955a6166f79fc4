"""Slack message builders: markdown -> mrkdwn, splitting to Slack's limits, approval blocks."""

from __future__ import annotations

import json
from typing import Any

from activities.slack import blocks
from workflows.types import ApprovalRequest, TaskStatus


def _request(**overrides: object) -> ApprovalRequest:
    values: dict[str, object] = {
        "request_id": "apr-task-slack-Ev1-3-call_1",
        "action_id": "a" * 32,
        "tool": "memory.save",
        "arguments": {"content": "We ship on <Friday> & celebrate"},
        "approvers": ["U_APPROVER", "cli:local"],
        "requested_at_iso": "2025-01-02T10:00:00+00:00",
        "expires_at_iso": "2025-01-05T10:00:00+00:00",
        "model": "offline/demo",
        "estimated_cost_usd": 0.0123,
    }
    values.update(overrides)
    return ApprovalRequest(**values)  # type: ignore[arg-type]


# markdown -> mrkdwn ------------------------------------------------------------------------


def test_emphasis_links_and_strike_become_mrkdwn() -> None:
    md = "**Bold** and *italic* and ~~gone~~, see [the docs](https://example.com/a?b=1)"
    assert blocks.markdown_to_mrkdwn(md) == (
        "*Bold* and _italic_ and ~gone~, see <https://example.com/a?b=1|the docs>"
    )


def test_headings_bullets_and_task_boxes() -> None:
    md = "# Summary\n- one\n  * two\n- [x] done\n- [ ] todo"
    assert blocks.markdown_to_mrkdwn(md).split("\n") == [
        "*Summary*",
        "• one",
        "  • two",
        "☑ done",
        "☐ todo",
    ]


def test_control_characters_are_escaped_but_slack_tokens_kept() -> None:
    md = "a < b && c > d, ask <@U123> in <#C999> or <https://x.test|here>"
    assert blocks.markdown_to_mrkdwn(md) == (
        "a &lt; b &amp;&amp; c &gt; d, ask <@U123> in <#C999> or <https://x.test|here>"
    )


def test_code_is_left_alone_except_escaping() -> None:
    md = "Run `a **b** <c>` then:\n```python\nx = **kw  # <tag>\n```\nafter **bold**"
    assert blocks.markdown_to_mrkdwn(md).split("\n") == [
        "Run `a **b** &lt;c&gt;` then:",
        "```",
        "x = **kw  # &lt;tag&gt;",
        "```",
        "after *bold*",
    ]


def test_quotes_stay_quotes_and_unclosed_fence_is_closed() -> None:
    assert blocks.markdown_to_mrkdwn("> **note** it") == "> *note* it"
    assert blocks.markdown_to_mrkdwn("```\ncode").split("\n") == ["```", "code", "```"]


def test_snake_case_and_multiplication_are_not_emphasis() -> None:
    assert blocks.markdown_to_mrkdwn("use run_tool_call and 2*3*4") == "use run_tool_call and 2*3*4"


# splitting -----------------------------------------------------------------------------------


def test_short_text_is_one_message() -> None:
    assert blocks.split_message("hello") == ["hello"]


def test_long_text_splits_at_lines_within_the_limit_and_loses_nothing() -> None:
    lines = [f"line {i} " + "x" * 50 for i in range(300)]
    parts = blocks.split_message("\n".join(lines), limit=1000)
    assert len(parts) > 1
    assert all(len(p) <= 1000 for p in parts)
    assert "\n".join(parts).split("\n") == lines


def test_a_split_code_block_is_closed_and_reopened() -> None:
    text = "intro\n```\n" + "\n".join(f"code {i}" for i in range(400)) + "\n```\nend"
    parts = blocks.split_message(text, limit=500)
    assert all(len(p) <= 500 for p in parts)
    for part in parts:
        assert part.count("```") % 2 == 0, part
    assert parts[1].startswith("```")


def test_one_huge_line_is_cut_at_spaces() -> None:
    text = " ".join(["word"] * 3000)
    parts = blocks.split_message(text, limit=3900)
    assert all(len(p) <= 3900 for p in parts)
    assert " ".join(parts).split() == text.split()


def test_default_limit_is_under_slacks_4000() -> None:
    parts = blocks.split_message("y" * 10_000)
    assert [len(p) <= 4000 for p in parts] == [True] * len(parts)
    assert "".join(parts) == "y" * 10_000


# approval messages ---------------------------------------------------------------------------


def test_approval_request_shows_what_args_cost_model_approvers_and_buttons() -> None:
    text, body = blocks.approval_request_message("task-slack-Ev1", "dev-platform", _request())
    dumped = json.dumps(body)
    assert "memory.save" in text and "dev-platform" in text
    assert "We ship on &lt;Friday&gt; &amp; celebrate" in dumped  # exact arguments, escaped
    assert "offline/demo" in dumped and "$0.0123" in dumped
    assert "<@U_APPROVER>" in dumped and "`cli:local`" in dumped
    actions: Any = next(b for b in body if b["type"] == "actions")
    ids = [e["action_id"] for e in actions["elements"]]
    assert ids == [blocks.APPROVE_ACTION, blocks.DENY_ACTION]
    value = actions["elements"][0]["value"]
    assert blocks.parse_button_value(value) == ("task-slack-Ev1", _request().request_id, "a" * 32)


def test_resolved_message_says_who_and_when_and_has_no_buttons() -> None:
    text, body = blocks.approval_resolved_message(
        "task-slack-Ev1",
        "dev-platform",
        _request(),
        "approved",
        "U_APPROVER",
        "2025-01-02T10:05:00+00:00",
    )
    dumped = json.dumps(body)
    assert all(b["type"] != "actions" for b in body)
    assert "Approved" in dumped and "<@U_APPROVER>" in dumped
    assert "<!date^1735812300^" in dumped  # when, in each reader's time zone
    assert text == "memory.save approved by U_APPROVER"


def test_huge_arguments_stay_within_block_limits() -> None:
    request = _request(arguments={"content": "z" * 20_000})
    _, body = blocks.approval_request_message("t", "a", request)
    sections = [b for b in body if b["type"] == "section" and "text" in b]
    assert all(len(b["text"]["text"]) <= 3000 for b in sections)  # type: ignore[index]
    shown = "".join(b["text"]["text"] for b in sections)  # type: ignore[index]
    assert shown.count("z") == 20_000
    assert len(body) <= 50


def test_button_values_that_are_not_ours_are_refused() -> None:
    for value in ("", "not json", "[]", '{"task_id": "t"}', '{"task_id":1,"request_id":"r","action_id":"a"}'):
        assert blocks.parse_button_value(value) is None


def test_progress_text_names_the_state_and_task() -> None:
    assert "Working" in blocks.progress_text("task-1")
    assert "Done" in blocks.progress_text("task-1", TaskStatus.SUCCESS)
    assert "Stopped: error" in blocks.progress_text("task-1", TaskStatus.ERROR)
    assert "`task-1`" in blocks.progress_text("task-1", TaskStatus.WAITING_USER)


def test_no_agent_reply_says_how_to_fix_it() -> None:
    text = blocks.no_agent_text("C0123")
    assert "<#C0123>" in text and "spec.surfaces.slack.channels" in text
