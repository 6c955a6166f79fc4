"""The approval card's rule-bearing fields and the cost estimate's arithmetic."""

from __future__ import annotations

import json
from dataclasses import replace

from activities.approval_activities import remaining_steps, step_cost
from activities.slack import blocks
from activities.slack.card_fields import approvers_text, cost_text, mention, usd_text
from workflows.types import ApprovalRequest

REQUEST = ApprovalRequest(
    request_id="apr-1",
    action_id="a" * 32,
    tool="github.create_issue",
    arguments={"title": "Track the ledger decision", "body": "x" * 900},
    approvers=["S0MAINT", "U0LEAD", "cli:local"],
    requested_at_iso="2025-01-02T10:00:00+00:00",
    expires_at_iso="2025-01-05T10:00:00+00:00",
    model="gpt-4o-mini",
    estimated_cost_usd=0.00004,
)


def test_a_cost_is_never_shown_as_zero_when_it_is_not() -> None:
    assert usd_text(0.0123) == "$0.0123"
    assert usd_text(0.00004) == "$0.00004"  # not "$0.0000"
    assert usd_text(0.0) == "$0"
    priced = step_cost("gpt-4o-mini", 1000, 200)
    assert priced is not None and priced > 0
    assert step_cost("offline/demo", 1000, 200) is None  # no price in the cost map


def test_groups_render_as_groups_and_the_resolved_count_is_shown() -> None:
    assert mention("S0MAINT") == "<!subteam^S0MAINT>" and mention("U0LEAD") == "<@U0LEAD>"
    assert approvers_text(REQUEST) == "<!subteam^S0MAINT>, <@U0LEAD>, `cli:local`"  # not resolved yet
    resolved = replace(REQUEST, approver_ids=["U0MIA", "U0MAX", "U0LEAD", "cli:local"])
    assert approvers_text(resolved).endswith("(4 people)")
    assert approvers_text(replace(REQUEST, approver_ids=[])).endswith("(nobody now)")


def test_the_estimate_says_how_it_was_made_or_why_there_is_none() -> None:
    noted = replace(REQUEST, estimate_note="2 more steps of about 1500+120 tokens at gpt-4o-mini's prices")
    assert cost_text(noted).startswith("$0.00004 to finish\n_2 more steps")
    offline = replace(
        REQUEST, estimated_cost_usd=0.0, estimate_note="offline/demo is the offline model: no cost"
    )
    assert cost_text(offline) == "offline/demo is the offline model: no cost"


def test_remaining_steps_repeat_the_steps_so_far_within_the_limit() -> None:
    assert remaining_steps(0, 12) == 1 and remaining_steps(2, 12) == 2
    assert remaining_steps(8, 12) == 4 and remaining_steps(12, 12) == 1


def test_long_arguments_are_folded_and_short_ones_are_not() -> None:
    _, body = blocks.approval_request_message("task-1", "helper", REQUEST)
    folded = [b for b in body if b["type"] == "section" and b.get("expand") is False]
    assert folded and "see more" in json.dumps(body)
    _, short = blocks.approval_request_message("task-1", "helper", replace(REQUEST, arguments={"title": "t"}))
    assert not [b for b in short if "expand" in b] and "see more" not in json.dumps(short)
