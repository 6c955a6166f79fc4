"""Building the prompt from the stored transcript: compaction of old tool results and the
running summary. Pure functions, used by the model activity and tested on their own.
"""

from __future__ import annotations

from typing import Any

from workflows.types import TranscriptView

PLACEHOLDER_PREVIEW_CHARS = 80
SUMMARY_ROLE = "summary"
SUMMARY_INSTRUCTION = (
    "Summarise the conversation so far for your own later use: the request, what you did, "
    "what tools returned that still matters, decisions made and what is left to do. Be brief."
)


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
    messages = [to_provider_message(m) for m in system]
    if summary is not None:
        messages.append(
            {
                "role": "user",
                "content": f"Summary of the conversation so far:\n{summary['content']}",
            }
        )
    for index, message in enumerate(recent):
        provider = to_provider_message(message)
        if index in compact:
            preview = str(message.get("content") or "")[:PLACEHOLDER_PREVIEW_CHARS]
            provider["content"] = f"[older result of {message.get('name') or 'tool'} compacted: {preview}…]"
        messages.append(provider)
    if summary is not None and not recent:
        messages.append({"role": "user", "content": "Continue the task from the summary."})
    return messages


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """A provider-independent estimate (about 4 characters a token), used for offline models."""
    chars = 0
    for message in messages:
        chars += len(str(message.get("content") or "")) + 8
        for call in message.get("tool_calls") or []:
            chars += len(str(call))
    return max(1, chars // 4)
