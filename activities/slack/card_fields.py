"""The approval card's fields that need a rule: how a person or a user group is mentioned,
how a cost is written (never "$0.0000" for something that costs), who may approve and the
estimated cost of finishing the task. Pure; `activities.slack.blocks` lays the card out."""

from __future__ import annotations

import re

from activities.slack.mrkdwn import escape
from workflows.message_types import ApprovalRequest

_USER_ID = re.compile(r"^[UW][A-Z0-9_]{2,}$")  # Slack user ids (underscores allowed)
_GROUP_ID = re.compile(r"^S[A-Z0-9_]{2,}$")  # Slack user group ids
FOLD_ARGUMENTS_CHARS = 600  # longer arguments are folded behind Slack's "see more"


def mention(user: str) -> str:
    """A user (or user group, shown by its @handle) as Slack renders it; anything else as code."""
    if _USER_ID.match(user):
        return f"<@{user}>"
    if _GROUP_ID.match(user):
        return f"<!subteam^{user}>"
    return f"`{escape(user)}`"


def usd_text(usd: float) -> str:
    """A cost with the precision it needs: never "$0.0000" for something that costs."""
    if usd <= 0:
        return "$0"
    if usd >= 0.0001:
        return f"${usd:.4f}"
    return f"${usd:.8f}".rstrip("0") if usd >= 0.00000001 else "< $0.00000001"


def approvers_text(request: ApprovalRequest) -> str:
    """The listed approvers (people and groups) and, once resolved, how many people that is."""
    listed = ", ".join(mention(a) for a in request.approvers) or "nobody"
    if request.approver_ids is None or request.approver_ids == request.approvers:
        return listed
    people = len(request.approver_ids)
    return f"{listed} ({people or 'nobody now'}{' people' if people > 1 else ' person' if people else ''})"


def cost_text(request: ApprovalRequest) -> str:
    if request.estimated_cost_usd <= 0 and request.estimate_note:
        return escape(request.estimate_note)
    note = f"\n_{escape(request.estimate_note)}_" if request.estimate_note else ""
    return f"{usd_text(request.estimated_cost_usd)} to finish{note}"
