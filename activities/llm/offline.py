"""`offline/demo`: a deterministic stand-in model that needs no key and no network.

It lets the embedded default show the whole flow — recall, a tool call that needs
approval, the tool, the reply — and says plainly in every reply that it is offline. It
follows simple cues in the request: "read/summarise the thread", "capture/remember the
decision", "what did we decide", "open an issue". Any LiteLLM provider replaces it once
its key is set.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from activities.llm.compaction import SUMMARY_INSTRUCTION
from workflows.prompts import MEMORIES_HEADER
from workflows.tool_catalog import model_tool_name
from workflows.types import ToolCall
from workflows.untrusted import UNTRUSTED_DATA_RULE, unwrap

LABEL = "[offline model]"
_REPO = re.compile(r"\b([A-Za-z0-9][\w.-]*/[\w.-]*[A-Za-z0-9])\b")
_DECISION = re.compile(r"\b(decid\w*|decision|agreed|we will|we'll|going with|chose)\b", re.I)


@dataclass
class OfflineReply:
    text: str
    tool_calls: list[ToolCall]


def _last(messages: list[dict[str, Any]], role: str) -> dict[str, Any] | None:
    return next((m for m in reversed(messages) if m["role"] == role), None)


def _memories(messages: list[dict[str, Any]]) -> str | None:
    """The recalled memories (the lines inside their block), if the task recalled any."""
    for message in messages:
        content = str(message.get("content") or "")
        if message["role"] == "user" and content.startswith(MEMORIES_HEADER):
            return unwrap(content.split("\n", 1)[1]) if "\n" in content else ""
    return None


def _request(messages: list[dict[str, Any]]) -> str:
    users = [
        str(m.get("content") or "")
        for m in messages
        if m["role"] == "user" and not str(m.get("content") or "").startswith(MEMORIES_HEADER)
    ]
    return users[0] if users else ""


def _called(messages: list[dict[str, Any]], tool: str) -> bool:
    name = model_tool_name(tool)
    return any(
        call["function"]["name"] == name
        for m in messages
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    )


def _decision_text(messages: list[dict[str, Any]], request: str) -> str:
    if ":" in request:
        after = request.split(":", 1)[1].strip()
        if after:
            return after
    for message in reversed(messages):
        if message["role"] == "tool":
            for line in str(message.get("content") or "").splitlines():
                if _DECISION.search(line):
                    return line.split(": ", 1)[-1].strip()
    stripped = re.sub(r"(?i)\b(please|remember|capture|save|note)( that| the decision)?\b", "", request)
    return stripped.strip(" .") or request


def _call(messages: list[dict[str, Any]], tool: str, arguments: dict[str, Any]) -> OfflineReply:
    call_id = f"call_{len(messages)}_{model_tool_name(tool)}"
    return OfflineReply("", [ToolCall(call_id, model_tool_name(tool), json.dumps(arguments))])


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """The message as the stand-in reads it: tool results out of their untrusted-data
    blocks, the system prompt without the rule about them (it echoes neither)."""
    content = message.get("content")
    if not isinstance(content, str):
        return message
    if message["role"] == "tool":
        return {**message, "content": unwrap(content)}
    if message["role"] == "system":
        return {**message, "content": content.replace(UNTRUSTED_DATA_RULE, "").rstrip()}
    return message


def respond(messages: list[dict[str, Any]], tools: list[str]) -> OfflineReply:
    """The offline model's deterministic answer to `messages` with `tools` on offer."""
    messages = [_plain(m) for m in messages]
    last = messages[-1] if messages else {"role": "user", "content": ""}
    request = _request(messages)
    lowered = request.lower()
    system = str((_last(messages, "system") or {}).get("content") or "")
    if SUMMARY_INSTRUCTION in str(last.get("content") or ""):
        return OfflineReply(f"{LABEL} Summary: the request was: {request[:300]}", [])

    wants_thread = "thread" in lowered or "summar" in lowered
    wants_save = any(w in lowered for w in ("capture", "remember", "save", "note that"))
    wants_issue = "issue" in lowered and any(w in lowered for w in ("open", "create", "file"))
    follow_up = str(last.get("content") or "").lower()
    said_yes = last["role"] == "user" and re.search(r"\b(yes|sure|please do|go ahead)\b", follow_up)

    if "slack.read_thread" in tools and wants_thread and not _called(messages, "slack.read_thread"):
        return _call(messages, "slack.read_thread", {})
    if "memory.save" in tools and wants_save and not _called(messages, "memory.save"):
        return _call(messages, "memory.save", {"content": _decision_text(messages, request)})
    if (
        "memory.search" in tools
        and "what did we decide" in lowered
        and not _called(messages, "memory.search")
    ):
        return _call(messages, "memory.search", {"query": request})
    if (
        "github.create_issue" in tools
        and (wants_issue or said_yes)
        and not _called(messages, "github.create_issue")
    ):
        repo_match = _REPO.search(request) or _REPO.search(system)
        if repo_match:
            title = _decision_text(messages, request)[:80]
            return _call(
                messages,
                "github.create_issue",
                {"repo": repo_match.group(1), "title": f"Track: {title}", "body": request[:1000]},
            )

    results = [str(m.get("content") or "") for m in messages if m["role"] == "tool"]
    parts = [f"{LABEL} I am running without a model provider, so I follow simple cues only."]
    if results:
        parts += results[-3:]
    else:
        remembered = _memories(messages)
        parts.append(f"What I remember here:\n{remembered}" if remembered else f"You asked: {request[:300]}")
    offer_issue = (
        "github.create_issue" in tools and wants_save and not _called(messages, "github.create_issue")
    )
    text = "\n".join(parts)
    if offer_issue:
        text += "\nOpen a GitHub issue to track it?"
    return OfflineReply(text, [])
