"""What the Discord surface posts, as Discord's JSON (pure): replies split at Discord's 2,000
characters, the approval message (an embed and Approve/Deny buttons) and how it reads once
decided, and the ids a button carries.

A button's `custom_id` (at most 100 characters) names the verb, the task and a short hash of the
request id; the surface reads the task's pending request and decides only if its request id
hashes the same, so a click on an old card never decides a newer request.
"""

from __future__ import annotations

import hashlib
import json
import re

from activities.slack.card_fields import usd_text
from workflows.message_types import ApprovalRequest
from workflows.types import TaskStatus

MAX_CONTENT = 2000  # Discord refuses longer message content
MAX_CUSTOM_ID = 100
MAX_FIELD = 1024  # an embed field's value
APPROVE, DENY = "a", "d"
_CUSTOM_ID = re.compile(r"^ol:([ad]):(.+):([0-9a-f]{16})$")
PREFIX = "discord:"  # how Discord users and roles appear among approvers and in contexts
ROLE_PREFIX = "discord:role:"
# Components: an action row holding buttons (Discord's types and styles).
ACTION_ROW, BUTTON, PRIMARY, DANGER = 1, 2, 3, 4
SUPPRESS_EMBEDS = 1 << 2


def split_content(text: str, limit: int = MAX_CONTENT) -> list[str]:
    """`text` in messages Discord takes, cut at a line (or a space) where it can be."""
    text = text.strip()
    parts: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = text.rfind(" ", 0, limit)
        if cut < limit // 2:
            cut = limit
        parts.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        parts.append(text)
    return parts


def request_hash(request_id: str) -> str:
    return hashlib.sha256(request_id.encode()).hexdigest()[:16]


def button_id(verb: str, task_id: str, request_id: str) -> str:
    custom_id = f"ol:{verb}:{task_id}:{request_hash(request_id)}"
    if len(custom_id) > MAX_CUSTOM_ID:
        raise ValueError(f"task id {task_id!r} is too long for a Discord button")
    return custom_id


def parse_button_id(custom_id: str) -> tuple[str, str, str] | None:
    """(verb, task id, request hash) of one of our buttons, or None."""
    matched = _CUSTOM_ID.match(custom_id)
    return (matched[1], matched[2], matched[3]) if matched else None


def mention(identity: str) -> str:
    """A listed approver or user as Discord renders it: `discord:123` a user, `discord:role:9` a
    role; anything else (a Slack id, cli:local) as code."""
    if identity.startswith(ROLE_PREFIX) and identity[len(ROLE_PREFIX) :].isdigit():
        return f"<@&{identity[len(ROLE_PREFIX) :]}>"
    if identity.startswith(PREFIX) and identity[len(PREFIX) :].isdigit():
        return f"<@{identity[len(PREFIX) :]}>"
    return f"`{identity}`"


def _arguments(arguments: dict[str, object]) -> str:
    text = json.dumps(arguments, indent=2, ensure_ascii=False, default=str)
    fence = "```json\n{}\n```"
    room = MAX_FIELD - len(fence) + 2
    return fence.format(text if len(text) <= room else text[: room - 1] + "…")


def approval_message(task_id: str, agent_name: str, request: ApprovalRequest) -> dict[str, object]:
    """The approval request: what the agent wants to do, who may decide, and the two buttons."""
    approvers = ", ".join(mention(a) for a in request.approvers) or "nobody"
    cost = usd_text(request.estimated_cost_usd) if request.estimated_cost_usd > 0 else request.estimate_note
    return {
        "content": f"⏳ **{agent_name}** wants to run `{request.tool}`. {approvers}, approve?",
        "embeds": [
            {
                "title": f"Approval needed: {request.tool}",
                "fields": [
                    {"name": "Arguments", "value": _arguments(request.arguments)},
                    {"name": "Who may approve", "value": approvers[:MAX_FIELD], "inline": True},
                    {"name": "Estimated cost to finish", "value": (cost or "$0")[:MAX_FIELD], "inline": True},
                    {"name": "Expires", "value": request.expires_at_iso, "inline": True},
                ],
                "footer": {"text": f"task {task_id} · request {request.request_id}"},
            }
        ],
        "components": [
            {
                "type": ACTION_ROW,
                "components": [
                    _button("Approve", PRIMARY, button_id(APPROVE, task_id, request.request_id)),
                    _button("Deny", DANGER, button_id(DENY, task_id, request.request_id)),
                ],
            }
        ],
        "allowed_mentions": {"parse": ["users", "roles"]},
    }


def _button(label: str, style: int, custom_id: str) -> dict[str, object]:
    return {"type": BUTTON, "style": style, "label": label, "custom_id": custom_id}


_OUTCOME = {
    "approved": "✅ Approved",
    "denied": "⛔ Denied",
    "expired": "⌛ Expired",
    "cancelled": "Cancelled",
}


def resolved_message(request: ApprovalRequest, outcome: str, decided_by: str | None) -> dict[str, object]:
    """The approval message once decided: the buttons gone, who decided and when."""
    by = f" by {mention(decided_by)}" if decided_by else ""
    said = _OUTCOME.get(outcome, outcome.capitalize())
    return {
        "content": f"{said}{by}: `{request.tool}`",
        "components": [],
        "allowed_mentions": {"parse": []},
    }


def reply_suffix(status: TaskStatus) -> str:
    if status == TaskStatus.WAITING_USER:
        return "\n\n-# Reply in this thread to answer; no mention needed."
    if status.finished and status != TaskStatus.SUCCESS:
        return f"\n\n-# The task ended: {status.value.lower().replace('_', ' ')}."
    return ""


def thread_name(request: str) -> str:
    """A thread's name (Discord allows 100 characters) from the request."""
    line = " ".join(request.split()) or "OpenLoop task"
    return line[:97] + "…" if len(line) > 100 else line
