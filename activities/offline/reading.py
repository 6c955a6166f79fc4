"""What every part of the offline model shares: its reply, its label, and how it reads a
conversation (the request's cues outside untrusted-data blocks, the bound repositories, the
tool calls it made). Imports nothing else from the offline model: its parts build on this.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from workflows.prompts import BOUND_REPOS_LINE, MEMORIES_HEADER
from workflows.tool_catalog import model_tool_name
from workflows.types import ToolCall
from workflows.untrusted import TAG

LABEL = "[offline model]"
ISSUE_OFFER = "Open a GitHub issue to track it?"
MAX_THREAD_LINES = 12
REPO = re.compile(r"\b([A-Za-z0-9][\w.-]*/[\w.-]*[A-Za-z0-9])\b")
YES = re.compile(r"^(yes|yep|yeah|sure|ok|okay|please do|go ahead|do it)\b", re.I)
THREAD_HEADER = re.compile(r"^Thread \S+ in \S+: \d+ message\(s\)$")  # slack.read_thread's
_BLOCKS = re.compile(rf"<{TAG}[^>]*>.*?</{TAG}>", re.S)


@dataclass
class OfflineReply:
    text: str
    tool_calls: list[ToolCall]


def users(messages: list[dict[str, Any]]) -> list[int]:
    """Where the user's messages are (the request, then follow-ups), memories left out."""
    return [
        i
        for i, m in enumerate(messages)
        if m["role"] == "user" and not str(m.get("content") or "").startswith(MEMORIES_HEADER)
    ]


def cues(text: str) -> str:
    """What a request asks, read outside its untrusted-data blocks (an issue title is data)."""
    return _BLOCKS.sub(" ", text)


def bound_repos(system: str) -> list[str]:
    for line in system.splitlines():
        if line.startswith(BOUND_REPOS_LINE):
            return [r.strip(" .") for r in line[len(BOUND_REPOS_LINE) :].split(",") if r.strip(" .")]
    return []


def repo(request: str, system: str) -> str | None:
    """The repository an issue goes to: one the request names among the bound ones, else the
    first bound one; with none bound, one the request names."""
    bound = bound_repos(system)
    named = REPO.findall(cues(request))
    return (
        next((r for r in named if r in bound), None)
        or (bound[0] if bound else None)
        or (named[0] if named else None)
    )


def called(messages: list[dict[str, Any]], tool: str) -> bool:
    name = model_tool_name(tool)
    return any(
        call["function"]["name"] == name
        for m in messages
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    )


def call(messages: list[dict[str, Any]], tool: str, arguments: dict[str, Any]) -> OfflineReply:
    call_id = f"call_{len(messages)}_{model_tool_name(tool)}"
    return OfflineReply("", [ToolCall(call_id, model_tool_name(tool), json.dumps(arguments))])
