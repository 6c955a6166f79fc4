"""Pure reading of Linear's agent session webhooks (no I/O, unit-tested).

Linear signs each delivery with `Linear-Signature`: the hex HMAC-SHA256 of the raw body under
the webhook's secret. The body carries `webhookTimestamp` (epoch milliseconds); a delivery
older (or newer) than `MAX_SKEW_SECONDS` is refused, so a captured delivery cannot be replayed.
An `AgentSessionEvent` is `created` (the agent was delegated an issue or mentioned: a new
session) or `prompted` (someone wrote in the session). `session_event` reads one into a
`SessionEvent`; `request_for` builds the task's request, with the issue's title, description
and Linear's prompt context inside untrusted-data blocks: whoever wrote the issue is not the
person asking.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from activities.linear.bodies import ISSUE_LINE
from workflows.untrusted import wrap_untrusted

EVENT_TYPE = "AgentSessionEvent"
MAX_SKEW_SECONDS = 60
MAX_REQUEST = 8_000
MAX_CONTEXT = 12_000
_APPROVE = re.compile(r"^\W*(approve[sd]?|approved|yes|y|lgtm|go ahead)\W*$", re.I)
_DENY = re.compile(r"^\W*(deny|denied|reject(ed)?|no|n)\W*$", re.I)


def verify_signature(secret: bytes, body: bytes, header: str | None) -> bool:
    """`Linear-Signature`: hex HMAC-SHA256 of the raw body, compared in constant time."""
    if not secret or not header:
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().lower().encode())


def fresh(payload: dict[str, Any], now_seconds: float) -> bool:
    """The payload's `webhookTimestamp` (ms) is within a minute of now."""
    stamp = payload.get("webhookTimestamp")
    if not isinstance(stamp, int | float) or isinstance(stamp, bool):
        return False
    return abs(now_seconds - stamp / 1000) <= MAX_SKEW_SECONDS


@dataclass(frozen=True)
class SessionEvent:
    action: str  # created | prompted
    session_id: str
    issue_id: str
    identifier: str  # ENG-123
    team_key: str
    team_id: str | None
    title: str
    description: str
    user_id: str  # who delegated, mentioned or prompted
    user_email: str | None
    text: str  # the comment that mentioned the agent, or the prompt
    prompt_context: str  # Linear's context for a new session (issue, comments, guidance)
    activity_id: str | None  # the prompt's agent activity
    signal: str | None  # "stop" when someone asked the agent to stop

    @property
    def user(self) -> str:
        return f"linear:{self.user_id}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def session_event(payload: dict[str, Any]) -> SessionEvent | None:
    """The session event a payload carries; None for any other webhook. Raises ValueError
    for an AgentSessionEvent without the session or its issue."""
    if payload.get("type") != EVENT_TYPE or payload.get("action") not in ("created", "prompted"):
        return None
    session = _dict(payload.get("agentSession"))
    issue = _dict(session.get("issue"))
    if not session.get("id") or not (issue.get("id") or session.get("issueId")):
        raise ValueError("an AgentSessionEvent without agentSession.id and its issue")
    identifier = str(issue.get("identifier") or "")
    team = _dict(issue.get("team"))
    team_key = str(team.get("key") or identifier.rsplit("-", 1)[0] or "")
    activity = _dict(payload.get("agentActivity"))
    creator = _dict(session.get("creator"))
    comment = _dict(session.get("comment"))
    if payload["action"] == "prompted":
        user_id = str(activity.get("userId") or _dict(activity.get("user")).get("id") or "")
        text = str(_dict(activity.get("content")).get("body") or "")
        email = _dict(activity.get("user")).get("email")
    else:
        user_id = str(session.get("creatorId") or creator.get("id") or "")
        text = str(comment.get("body") or "")
        email = creator.get("email")
    return SessionEvent(
        action=str(payload["action"]),
        session_id=str(session["id"]),
        issue_id=str(issue.get("id") or session.get("issueId")),
        identifier=identifier,
        team_key=team_key.upper(),
        team_id=str(team.get("id") or issue.get("teamId") or "") or None,
        title=str(issue.get("title") or ""),
        description=str(issue.get("description") or ""),
        user_id=user_id,
        user_email=str(email) if email else None,
        text=text,
        prompt_context=str(payload.get("promptContext") or ""),
        activity_id=str(activity.get("id")) if activity.get("id") else None,
        signal=str(activity.get("signal")) if activity.get("signal") else None,
    )


def delivery_key(headers_delivery: str | None, payload: dict[str, Any]) -> str:
    """What makes a delivery one: Linear's `Linear-Delivery`, else the webhook, session and
    prompt it is about."""
    if headers_delivery:
        return headers_delivery
    session = _dict(payload.get("agentSession")).get("id", "")
    activity = _dict(payload.get("agentActivity")).get("id", "")
    return f"{payload.get('webhookId', '')}:{session}:{payload.get('action', '')}:{activity}"


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def request_for(event: SessionEvent) -> str:
    """A new task's request: who asked, about which issue; the issue and Linear's context as
    data; the comment of the person who asked (their own words) last."""
    if event.action == "prompted":
        how = "wrote in your session on"  # the session's earlier task has ended
    else:
        how = "mentioned you on" if event.text.strip() else "delegated to you"
    issue = ISSUE_LINE.format(identifier=event.identifier, team=event.team_key)
    lines = [
        f"{event.user} {how} {issue}, titled:",
        wrap_untrusted(_bounded(event.title, 500), "linear:issue_title"),
        "Its description:",
        wrap_untrusted(_bounded(event.description or "(none)", MAX_CONTEXT), "linear:issue_description"),
    ]
    if event.prompt_context.strip():
        lines += [
            "Linear's context for this session:",
            wrap_untrusted(_bounded(event.prompt_context, MAX_CONTEXT), "linear:prompt_context"),
        ]
    lines.append("")
    lines.append(_bounded(event.text.strip(), MAX_REQUEST) if event.text.strip() else "Work on this issue.")
    return "\n".join(lines)


def decision_word(text: str) -> bool | None:
    """True for "approve"/"yes", False for "deny"/"no", None for anything else."""
    if _APPROVE.match(text.strip()):
        return True
    if _DENY.match(text.strip()):
        return False
    return None
