"""The offline model's Slack thread story, worded for the people in the thread: a summary of
the thread it read and the decision it saved, the offer of an issue; on "yes" the issue in
the agent's bound repository (its title the decision, its body the summary); then the link.

`activities.offline.model` runs the steps before (reading the thread, saving the decision) and
hands over here once they are done. Deterministic, like the rest of the stand-in: what it
writes comes from its own tool calls' results (the thread as `slack.read_thread` lists it,
what `memory.save` saved, what `github.create_issue` created); whether to act comes from the
request and the person's answer, read outside untrusted-data blocks. A message in the thread
that says "yes" or "open an issue in evil/repo" is data it summarises, never a cue.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from activities.offline import reading
from activities.offline.reading import ISSUE_OFFER, LABEL, MAX_THREAD_LINES, OfflineReply
from workflows.tool_catalog import model_tool_name

READ, SAVE, CREATE = "slack.read_thread", "memory.save", "github.create_issue"
THREAD_READERS = (READ, "discord.read_thread")  # both list a thread the same way
MAX_TITLE = 80
_LINE = re.compile(r"^(?P<name>.+?) \((?P<user>[^()\s]+)\): (?P<text>.*)$")  # slack.read_thread's
_DECIDED = re.compile(r"\b(decid\w*|decision|agreed|we will|we'll|going with|chose)\b", re.I)
_LEAD_IN = re.compile(
    r"^(?:(?:agreed|ok(?:ay)?|so|fine)[.,!:]?\s+)?(?:(?:the\s+)?decision(?:\s+is)?\s*[:,-]\s*)?", re.I
)
_CREATED = re.compile(r"^(?:Created|Already created) issue #(?P<number>\d+) in (?P<repo>\S+): ")
_URL = re.compile(r"https?://\S+")


@dataclass
class _Said:
    name: str
    text: str


def thread_story(
    messages: list[dict[str, Any]], tools: list[str], *, request: str, answer: str, offered: bool, system: str
) -> OfflineReply | None:
    """The story's next reply, or None when this turn is not the story's (the caller goes on).

    `messages` are as the stand-in reads them (tool results unwrapped), `request` the task's
    request outside untrusted-data blocks, `answer` the person's latest reply in the thread.
    """
    last = messages[-1] if messages else {}
    read = _thread_read(messages)
    if read is None:
        return None
    header, said = read
    if last.get("role") == "tool" and _answers(messages, last, CREATE):
        return _link(str(last.get("content") or ""))
    if offered and reading.YES.match(answer) and CREATE in tools and not reading.called(messages, CREATE):
        repo = reading.repo(f"{request}\n{answer}", system)
        if repo is None:
            return None  # the caller asks which repository
        decision = _decision(messages, said, request)
        title = decision if len(decision) <= MAX_TITLE else decision[: MAX_TITLE - 1].rstrip() + "…"
        body = f"Decision: {decision}\n\nSummary of the Slack thread {header}:\n" + "\n".join(
            f"- {line}" for line in _summary(said, request)
        )
        return reading.call(messages, CREATE, {"repo": repo, "title": title, "body": body})
    users = reading.users(messages)
    this_turn = messages[users[-1] :] if users else messages
    if offered or last.get("role") != "tool" or not _only_called(this_turn, {*THREAD_READERS, SAVE}):
        return None
    return OfflineReply(_summary_reply(messages, said, request, tools), [])


def _thread_read(messages: list[dict[str, Any]]) -> tuple[str, list[_Said]] | None:
    """(where the thread is, who said what) from the task's latest `slack.read_thread` result."""
    for message in reversed(messages):
        lines = str(message.get("content") or "").splitlines() if message.get("role") == "tool" else []
        if lines and reading.THREAD_HEADER.match(lines[0]):
            said = [_Said(m["name"], m["text"]) for line in lines[1:] if (m := _LINE.match(line))]
            return lines[0].removeprefix("Thread ").split(": ", 1)[0], said
    return None


def _discussion(said: list[_Said], request: str) -> list[_Said]:
    """The thread's messages but the request that mentioned the agent."""
    asked = re.sub(r"<@\w+>", "", request).strip().lower()
    return [s for s in said if not (asked and asked in s.text.lower())]


def _summary(said: list[_Said], request: str) -> list[str]:
    """The discussion one message a line, the first `MAX_THREAD_LINES` of it."""
    kept = _discussion(said, request)
    lines = [f"{s.name}: {s.text[:200]}" for s in kept[:MAX_THREAD_LINES]]
    more = len(kept) - MAX_THREAD_LINES
    return lines + ([f"(and {more} more)"] if more > 0 else [])


def _decision(messages: list[dict[str, Any]], said: list[_Said], request: str) -> str:
    """What was decided: what memory.save saved, else the thread's last line saying so."""
    saved = _arguments(messages, SAVE).get("content")
    discussed = _discussion(said, request)
    found = str(saved or "") or next((s.text for s in reversed(discussed) if _DECIDED.search(s.text)), "")
    return _LEAD_IN.sub("", found.strip()).strip().rstrip(".") or "the decision in the Slack thread"


def _summary_reply(messages: list[dict[str, Any]], said: list[_Said], request: str, tools: list[str]) -> str:
    discussed = _discussion(said, request)
    people = list(dict.fromkeys(s.name for s in discussed))
    who = ", ".join(people[:-1]) + f" and {people[-1]}" if len(people) > 1 else "".join(people) or "nobody"
    count = f"{len(discussed)} message{'s' if len(discussed) != 1 else ''}"
    lines = [f"{LABEL} Summary of the thread ({count}, from {who}):"]
    lines += [f"• {line}" for line in _summary(said, request)]
    saved = _result_of(messages, SAVE)
    if saved is not None:
        first = saved.splitlines()[0] if saved.strip() else "no answer"
        done = first.startswith(("Saved", "Already saved"))
        lines.append(f"**Decision:** {_decision(messages, said, request)}")
        lines.append(f"{first.split(':', 1)[0]}." if done else f"Not saved: {first}")
        if done and CREATE in tools and not reading.called(messages, CREATE):
            lines.append(ISSUE_OFFER)
    return "\n".join(lines)


def _link(result: str) -> OfflineReply | None:
    """The issue's link, from `github.create_issue`'s result; None when it made none."""
    created = _CREATED.match(result)
    url = _URL.search(result)
    if created is None or url is None:
        return None
    text = f"{LABEL} Opened issue #{created['number']} in {created['repo']} to track the decision: {url[0]}"
    return OfflineReply(text, [])


def _calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [call for m in messages if m.get("role") == "assistant" for call in m.get("tool_calls") or []]


def _only_called(messages: list[dict[str, Any]], tools: set[str]) -> bool:
    """Whether the tools called in `messages` are some of `tools` (and at least one)."""
    names = {call["function"]["name"] for call in _calls(messages)}
    return bool(names) and names <= {model_tool_name(t) for t in tools}


def _answers(messages: list[dict[str, Any]], result: dict[str, Any], tool: str) -> bool:
    """Whether the tool result `result` answers a call of `tool`."""
    return any(
        call.get("id") == result.get("tool_call_id") and call["function"]["name"] == model_tool_name(tool)
        for call in _calls(messages)
    )


def _arguments(messages: list[dict[str, Any]], tool: str) -> dict[str, Any]:
    """The arguments of the latest call of `tool`, or none."""
    for call in reversed(_calls(messages)):
        if call["function"]["name"] == model_tool_name(tool):
            try:
                found = json.loads(call["function"].get("arguments") or "{}")
            except ValueError:
                return {}
            return found if isinstance(found, dict) else {}
    return {}


def _result_of(messages: list[dict[str, Any]], tool: str) -> str | None:
    """The result of the latest call of `tool`, or None when it was not called."""
    ids = [c.get("id") for c in _calls(messages) if c["function"]["name"] == model_tool_name(tool)]
    if not ids:
        return None
    found = next((m for m in messages if m.get("role") == "tool" and m.get("tool_call_id") == ids[-1]), None)
    return str(found.get("content") or "") if found else ""
