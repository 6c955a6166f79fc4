"""`offline/demo`: a deterministic stand-in model that needs no key and no network.

It lets the embedded default show the whole flow — recall, a tool call that needs
approval, the tool, the reply — and says plainly in every reply that it is offline. It
follows simple cues in the request (whole words, never inside untrusted-data blocks):
"read/summarise the thread", "summarise the meeting" (a Zoom transcript:
`activities.offline.meeting`), "capture/remember the decision", "what did we decide", "open
an issue", "check with / ask <teammate>" (given `agent.ask_teammate`: it passes the request
on, never what its tools returned, and quotes the answer). After saving a decision it
offers an issue; a "yes" in the thread opens it in the agent's bound repository (the
system prompt names it, `workflows.prompts`). A request to fix something ("fix", "failing", "broken", a CI
investigation that may propose a fix), given the coding tools, runs
`activities.offline.coding`: it fixes the one bug it knows (the demo project's) and
proposes the draft pull request. A playbook step's request (it demands a JSON object of
declared fields) is answered in that shape by `activities.offline.playbook`. Any LiteLLM
provider replaces it once its key is set.
"""

from __future__ import annotations

import re
from typing import Any

from activities.offline import reading
from activities.offline.coding import coding_step
from activities.offline.linear import linear_step
from activities.offline.meeting import meeting_story
from activities.offline.playbook import playbook_step
from activities.offline.reading import ISSUE_OFFER, LABEL, MAX_THREAD_LINES, OfflineReply
from activities.offline.thread import THREAD_READERS, thread_story
from activities.store.transcript import SUMMARY_INSTRUCTION
from workflows.prompts import MEMORIES_HEADER
from workflows.untrusted import UNTRUSTED_DATA_RULE, unwrap

_DECISION = re.compile(r"\b(decid\w*|decision|agreed|we will|we'll|going with|chose)\b", re.I)
_OPEN_ISSUE = re.compile(r"\b(open|create|file|raise)\b(\s+[\w-]+){0,3}?\s+issues?\b", re.I)
_SAVE = re.compile(r"\b(capture|remember|save|note that)\b", re.I)
_TEAMMATE = re.compile(
    r"\b(?:(?:check|confirm|verify|consult)\s+with|ask)\s+@?([a-z0-9][a-z0-9-]*[a-z0-9])\b", re.I
)
_NOT_TEAMMATES = {"me", "you", "them", "him", "her", "us", "the", "a", "an", "it", "whether", "if"}
_NO = re.compile(r"^(no|nope|not now|don't|do not)\b", re.I)
# "U_ALICE: " (or "discord:1300…: ") before a follow-up's text
_SPEAKER = re.compile(r"^(?:[\w.@\[\]-]{1,80}:)?[\w.@\[\]-]{1,80}:\s*")


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
    users = reading.users(messages)
    return str(messages[users[0]].get("content") or "") if users else ""


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
    cues = reading.cues(request)
    lowered = cues.lower()
    system = str((_last(messages, "system") or {}).get("content") or "")
    if SUMMARY_INSTRUCTION in str(last.get("content") or ""):
        return OfflineReply(f"{LABEL} Summary: the request was: {request[:300]}", [])
    step = playbook_step(messages, tools, request, cues, system)
    if step is not None:
        return step
    meeting = meeting_story(messages, tools, request, cues)  # a Zoom transcript to summarise
    if meeting is not None:
        return meeting

    users = reading.users(messages)
    turn = users[-1] if users else 0  # the user's latest message: this turn starts there
    answer = ""
    if len(users) > 1 and last["role"] == "user":
        answer = _SPEAKER.sub("", str(last.get("content") or "").strip(), count=1).strip()
    offered = any(ISSUE_OFFER in str(m.get("content") or "") for m in messages if m["role"] == "assistant")
    wants_thread = "thread" in lowered or "summar" in lowered
    wants_save = bool(_SAVE.search(cues))
    wants_issue = bool(_OPEN_ISSUE.search(cues)) or (offered and bool(reading.YES.match(answer)))
    can_issue = "github.create_issue" in tools and not reading.called(messages, "github.create_issue")

    if offered and _NO.match(answer):
        return OfflineReply(f"{LABEL} OK, no issue.", [])
    read = next((t for t in THREAD_READERS if t in tools), None)
    if read is not None and wants_thread and not reading.called(messages, read):
        return reading.call(messages, read, {})
    teammate = next((n for n in _TEAMMATE.findall(cues) if n.lower() not in _NOT_TEAMMATES), None)
    if "agent.ask_teammate" in tools and teammate and not reading.called(messages, "agent.ask_teammate"):
        # The request only: what the tools returned is data, and a teammate's request is not.
        question = cues.strip()[:500]
        return reading.call(
            messages, "agent.ask_teammate", {"teammate": teammate.lower(), "question": question}
        )
    if "memory.save" in tools and wants_save and not reading.called(messages, "memory.save"):
        return reading.call(messages, "memory.save", {"content": _decision_text(messages, cues)})
    if (
        "memory.search" in tools
        and "what did we decide" in lowered
        and not reading.called(messages, "memory.search")
    ):
        return reading.call(messages, "memory.search", {"query": request})
    commented = linear_step(messages, tools, cues)
    if commented is not None:
        return commented
    if not wants_issue:  # asked for an issue, it tracks the problem rather than fixing it
        coding = coding_step(messages, tools, cues, system)
        if coding is not None:
            return coding
    story = thread_story(messages, tools, request=cues, answer=answer, offered=offered, system=system)
    if story is not None:
        return story
    if can_issue and wants_issue:
        repo = reading.repo(f"{request}\n{answer}", system)
        if repo is None:
            return OfflineReply(f"{LABEL} Which repository should the issue go to (owner/name)?", [])
        title = _decision_text(messages, cues)[:80]
        body = "\n\n".join(_results(messages, 0))[:1000] or cues.strip()[:1000]
        return reading.call(
            messages, "github.create_issue", {"repo": repo, "title": f"Track: {title}", "body": body}
        )

    parts = [f"{LABEL} I am running without a model provider, so I follow simple cues only."]
    results = _results(messages, turn)
    if results:
        parts += results
    elif answer:
        parts.append(f"You said: {answer[:300]}")
    else:
        remembered = _memories(messages)
        parts.append(f"What I remember here:\n{remembered}" if remembered else f"You asked: {request[:300]}")
    text = "\n".join(parts)
    if can_issue and wants_save and not offered and reading.called(messages, "memory.save"):
        text += f"\n{ISSUE_OFFER}"
    return OfflineReply(text, [])


def _results(messages: list[dict[str, Any]], since: int) -> list[str]:
    """The tool results after message `since`, a thread read as its first lines."""
    found = []
    for message in messages[since:]:
        if message["role"] != "tool":
            continue
        content = str(message.get("content") or "")
        lines = content.splitlines()
        if lines and reading.THREAD_HEADER.match(lines[0]):
            more = len(lines) - 1 - MAX_THREAD_LINES
            content = "Summary of the thread:\n" + "\n".join(
                f"- {line[:200]}" for line in lines[1 : 1 + MAX_THREAD_LINES]
            )
            content += f"\n(and {more} more)" if more > 0 else ""
        found.append(content)
    return found[-3:]
