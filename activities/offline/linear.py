"""The offline model on a Linear issue: "comment …" in the request of a Linear task comments
on the issue the request names, once; the reply then quotes what the tool returned. The
request names it outside its untrusted blocks, as "Linear issue ENG-123 (team ENG)"
(`activities.linear.bodies.ISSUE_LINE`; the offline model reads requests, never imports
their writers)."""

from __future__ import annotations

import re
from typing import Any

from activities.offline import reading
from activities.offline.reading import LABEL, OfflineReply

ISSUE_LINE_PATTERN = re.compile(r"Linear issue ([A-Za-z][A-Za-z0-9_]*-\d+) \(team ([^)\s]+)\)")
_COMMENT = re.compile(
    r"\bcomment\b(?:\s+on\s+(?:the|this)\s+issue)?\s*(?:that|saying|with|:)?\s*(.*)", re.I | re.S
)


def linear_step(messages: list[dict[str, Any]], tools: list[str], cues: str) -> OfflineReply | None:
    """A `linear.comment` call when a Linear request asks for a comment and none was made."""
    if "linear.comment" not in tools or reading.called(messages, "linear.comment"):
        return None
    issue = ISSUE_LINE_PATTERN.search(cues)
    asked = _COMMENT.search(cues[issue.end() :]) if issue else None
    if issue is None or asked is None:
        return None
    said = " ".join(asked.group(1).split()).strip(" .") or "noted"
    body = f"{said[:1].upper()}{said[1:]}. {LABEL}"
    return reading.call(
        messages, "linear.comment", {"team": issue.group(2), "issue": issue.group(1), "body": body}
    )
