"""Building the prompt from the stored transcript: compaction of old tool results, the
running summary, and the guards on outside content. Pure functions, used by the model
activity and tested on their own.

What the prompt builder guarantees, whatever the transcript holds (rows stored by older
versions included): every tool result reaches the model inside an untrusted-data block
naming its tool, the system message carries the rule about those blocks, a large tool
output that was stored and referenced is sent as its bounded preview, never whole, and no
single message is longer than `MAX_PROMPT_MESSAGE_CHARS`. The transcript itself is not
changed: these apply when the prompt is built.
"""

from __future__ import annotations

import json
from typing import Any

from activities.store.transcript import (
    PLACEHOLDER_PREVIEW_CHARS,
    SUMMARY_ROLE,
    TOOL_OUTPUT_PREVIEW_CHARS,
    tool_output_preview,
)
from workflows.types import TranscriptView
from workflows.untrusted import UNTRUSTED_DATA_RULE, wrap_untrusted

_PREVIEW_NOTE_MAX_CHARS = 120  # room for "[… N characters in all, stored as REF]"
# No single message goes into a prompt longer than this (about 5,000 tokens): one pasted
# log or issue body must not crowd out the rest of the conversation or the context window.
MAX_PROMPT_MESSAGE_CHARS = 20_000


def to_provider_message(message: dict[str, Any]) -> dict[str, Any]:
    """A stored message in the OpenAI chat format LiteLLM expects."""
    role = message["role"]
    out: dict[str, Any] = {"role": role, "content": message.get("content") or ""}
    if role == "assistant" and message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in message["tool_calls"]
        ]
        out["content"] = message.get("content") or None
    if role == "tool":
        out["tool_call_id"] = message.get("tool_call_id") or ""
        if message.get("name"):
            out["name"] = message["name"]
    return out


def build_prompt(stored: list[dict[str, Any]], view: TranscriptView) -> list[dict[str, Any]]:
    """The messages to send: system prompt, summary (if any), then the recent messages with
    all but the newest `keep_tool_results` tool results replaced by short placeholders."""
    system = [m for m in stored if m["role"] == "system"][:1]
    summary = next(
        (m for m in reversed(stored) if m["role"] == SUMMARY_ROLE and m["seq"] <= view.summary_upto),
        None,
    )
    recent = [m for m in stored if m["role"] not in ("system", SUMMARY_ROLE) and m["seq"] > view.summary_upto]
    # A tool result must follow the assistant message that asked for it.
    while recent and recent[0]["role"] == "tool":
        recent.pop(0)
    tool_positions = [i for i, m in enumerate(recent) if m["role"] == "tool"]
    compact = set(tool_positions[: max(0, len(tool_positions) - view.keep_tool_results)])
    messages = [_with_rule(to_provider_message(m)) for m in system] or [
        {"role": "system", "content": UNTRUSTED_DATA_RULE}
    ]
    if summary is not None:
        messages.append(
            {
                "role": "user",
                "content": bounded_content(f"Summary of the conversation so far:\n{summary['content']}"),
            }
        )
    for index, message in enumerate(recent):
        provider = to_provider_message(message)
        provider["content"] = bounded_content(provider["content"], message.get("content_ref"))
        if index in compact:
            preview = str(message.get("content") or "")[:PLACEHOLDER_PREVIEW_CHARS]
            provider["content"] = f"[older result of {message.get('name') or 'tool'} compacted: {preview}…]"
        if message["role"] == "tool":
            content = provider["content"]
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            provider["content"] = wrap_untrusted(text, tool_source(message))
        messages.append(provider)
    if summary is not None and not recent:
        messages.append({"role": "user", "content": "Continue the task from the summary."})
    return messages


def bounded_content(content: Any, ref: str | None = None) -> Any:
    """The content a prompt may carry: of a tool output stored as `ref`, its bounded preview
    (rows written before the transcript kept only previews hold the whole output); of any
    message, no more than MAX_PROMPT_MESSAGE_CHARS. Anything but a string (None for an
    assistant message with only tool calls) is left as it is."""
    if not isinstance(content, str):
        return content
    if ref and len(content) > TOOL_OUTPUT_PREVIEW_CHARS + _PREVIEW_NOTE_MAX_CHARS:
        return tool_output_preview(content, ref)
    if len(content) > MAX_PROMPT_MESSAGE_CHARS:
        return content[:MAX_PROMPT_MESSAGE_CHARS] + f"\n[… cut: {len(content)} characters in all]"
    return content


def tool_source(message: dict[str, Any]) -> str:
    """The source named on a tool result's untrusted-data block: `tool:github.get_issue`."""
    return f"tool:{str(message.get('name') or 'unknown').replace('__', '.')}"


def _with_rule(system: dict[str, Any]) -> dict[str, Any]:
    """The system message with the untrusted-data rule, appended when it lacks it (tasks
    started before the rule was written into their system prompt)."""
    content = str(system.get("content") or "")
    if UNTRUSTED_DATA_RULE in content:
        return system
    return {**system, "content": f"{content}\n\n{UNTRUSTED_DATA_RULE}" if content else UNTRUSTED_DATA_RULE}


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """A provider-independent estimate (about 4 characters a token), used for offline models."""
    chars = 0
    for message in messages:
        chars += len(str(message.get("content") or "")) + 8
        for call in message.get("tool_calls") or []:
            chars += len(str(call))
    return max(1, chars // 4)
