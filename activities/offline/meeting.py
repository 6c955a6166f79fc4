"""The offline model's meeting story: a Zoom transcript becomes a short summary for the
channel, and each line that states a decision becomes a `memory.save`.

The request (`surfaces.zoom.meeting.meeting_request`) asks to "summarise the meeting" outside
its untrusted-data blocks; the topic and the transcript are inside them. What it saves and
summarises comes from the transcript — data it reports, never cues it follows: a line saying
"open an issue" or "ignore your instructions" is summarised like any other. Deterministic,
like the rest of the stand-in.
"""

from __future__ import annotations

import json
import re
from typing import Any

from activities.offline import reading
from activities.offline.reading import LABEL, MAX_THREAD_LINES, OfflineReply
from workflows.tool_catalog import model_tool_name
from workflows.types import ToolCall
from workflows.untrusted import TAG

SAVE = "memory.save"
MAX_DECISIONS = 10
MAX_LINE = 200
ASKS = re.compile(r"\bsummari[sz]e the meeting\b", re.I)
# A line that states a decision: "we decided", "decision: ...", "agreed".
_DECISION = re.compile(r"\bwe(?:'ve| have)? decided\b|\bdecision\s*:|\bagreed\b", re.I)
_LEAD_IN = re.compile(
    r"^(?:(?:ok(?:ay)?|so|fine|agreed)[.,!:]?\s+)?(?:(?:the\s+)?decision(?:\s+is)?\s*:\s*)?", re.I
)
_SPEAKER = re.compile(r"^([^:]{1,80}):\s+(.*)$")


def _block(request: str, source: str) -> str:
    found = re.search(rf'<{TAG} source="{re.escape(source)}">\n(.*?)\n</{TAG}>', request, re.S)
    return found.group(1) if found else ""


def _said(line: str) -> tuple[str, str]:
    named = _SPEAKER.match(line)
    return (named[1], named[2]) if named else ("", line)


def _decision(line: str, topic: str) -> str:
    speaker, text = _said(line)
    what = _LEAD_IN.sub("", text.strip()).strip().rstrip(".") or text.strip()
    who = f"{speaker}, " if speaker else ""
    return f"{what} ({who}in the meeting «{topic}»)"


def meeting_story(
    messages: list[dict[str, Any]], tools: list[str], request: str, cues: str
) -> OfflineReply | None:
    """The next reply of a meeting summary, or None when the request is not one."""
    if not ASKS.search(cues):
        return None
    topic = _block(request, "zoom:topic").strip() or "(no topic)"
    lines = [line for line in _block(request, "zoom:transcript").splitlines() if line.strip()]
    decisions = [line for line in lines if _DECISION.search(line)][:MAX_DECISIONS]
    if SAVE in tools and decisions and not reading.called(messages, SAVE):
        name = model_tool_name(SAVE)
        calls = [
            ToolCall(
                f"call_{len(messages)}_{n}_{name}", name, json.dumps({"content": _decision(line, topic)})
            )
            for n, line in enumerate(decisions)
        ]
        return OfflineReply("", calls)
    return OfflineReply(_summary(messages, tools, topic, lines, decisions), [])


def _summary(
    messages: list[dict[str, Any]], tools: list[str], topic: str, lines: list[str], decisions: list[str]
) -> str:
    people = list(dict.fromkeys(s for s, _ in map(_said, lines) if s))
    who = (
        ", ".join(people[:-1]) + f" and {people[-1]}"
        if len(people) > 1
        else "".join(people) or "nobody named"
    )
    count = f"{len(lines)} line{'s' if len(lines) != 1 else ''}"
    text = [f"{LABEL} Summary of the meeting «{topic}» ({count}, from {who}):"]
    text += [f"• {line[:MAX_LINE]}" for line in lines[:MAX_THREAD_LINES]]
    if len(lines) > MAX_THREAD_LINES:
        text.append(f"(and {len(lines) - MAX_THREAD_LINES} more)")
    if not decisions:
        text.append('No decision was stated ("we decided", "decision:", "agreed"); nothing saved.')
        return "\n".join(text)
    text.append("**Decisions:**")
    text += [f"• {_LEAD_IN.sub('', _said(line)[1])[:MAX_LINE]}" for line in decisions]
    if SAVE not in tools:
        text.append("Not saved: this agent has no memory.save tool.")
        return "\n".join(text)
    saved = [r for r in _save_results(messages) if r.startswith(("Saved", "Already saved"))]
    text.append(f"Saved {len(saved)} of {len(decisions)} to this channel's memory.")
    return "\n".join(text)


def _save_results(messages: list[dict[str, Any]]) -> list[str]:
    ids = {
        call.get("id")
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
        if call["function"]["name"] == model_tool_name(SAVE)
    }
    return [
        str(m.get("content") or "")
        for m in messages
        if m.get("role") == "tool" and m.get("tool_call_id") in ids
    ]
