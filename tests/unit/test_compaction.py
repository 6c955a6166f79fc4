"""Prompt building from the stored transcript: placeholders, the summary, no orphaned tool results."""

from __future__ import annotations

from typing import Any

from activities.llm.compaction import PLACEHOLDER_PREVIEW_CHARS, SUMMARY_ROLE, build_prompt, estimate_tokens
from workflows.types import TranscriptView


def call(call_id: str, name: str = "memory__search") -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": '{"query": "x"}'}


def transcript(*messages: dict[str, Any]) -> list[dict[str, Any]]:
    """Stored rows as `transcript.load` returns them: the message plus its seq (from 1)."""
    return [{"tool_calls": [], **m, "seq": seq} for seq, m in enumerate(messages, start=1)]


def tool(call_id: str, content: str, name: str = "memory__search") -> dict[str, Any]:
    return {"role": "tool", "content": content, "tool_call_id": call_id, "name": name}


SYSTEM = {"role": "system", "content": "You are helper."}
USER = {"role": "user", "content": "Find the decision."}


def three_rounds() -> list[dict[str, Any]]:
    return transcript(
        SYSTEM,
        USER,
        {"role": "assistant", "content": "", "tool_calls": [call("c1")]},
        tool("c1", "result one " + "x" * 200),
        {"role": "assistant", "content": "", "tool_calls": [call("c2", "slack__read_thread")]},
        tool("c2", "result two", name="slack__read_thread"),
        {"role": "assistant", "content": "", "tool_calls": [call("c3")]},
        tool("c3", "result three"),
    )


def test_everything_is_sent_in_the_provider_format_when_nothing_is_compacted() -> None:
    messages = build_prompt(three_rounds(), TranscriptView(keep_tool_results=6))
    assert messages[0] == {"role": "system", "content": "You are helper."}
    assert messages[1] == {"role": "user", "content": "Find the decision."}
    assert messages[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "memory__search", "arguments": '{"query": "x"}'},
            }
        ],
    }
    assert messages[3] == {
        "role": "tool",
        "content": "result one " + "x" * 200,
        "tool_call_id": "c1",
        "name": "memory__search",
    }
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "tool"] * 3
    assert all("seq" not in m for m in messages)


def test_older_tool_results_become_placeholders_and_the_newest_are_kept() -> None:
    messages = build_prompt(three_rounds(), TranscriptView(keep_tool_results=1))
    tools = [m for m in messages if m["role"] == "tool"]
    preview = ("result one " + "x" * 200)[:PLACEHOLDER_PREVIEW_CHARS]
    assert tools[0]["content"] == f"[older result of memory__search compacted: {preview}…]"
    assert tools[1]["content"] == "[older result of slack__read_thread compacted: result two…]"
    assert tools[2]["content"] == "result three"
    # Placeholders keep the pairing with the call that asked for them.
    assert [t["tool_call_id"] for t in tools] == ["c1", "c2", "c3"]

    keep_two = [
        m["content"]
        for m in build_prompt(three_rounds(), TranscriptView(keep_tool_results=2))
        if m["role"] == "tool"
    ]
    assert keep_two[0].startswith("[older result") and keep_two[1:] == ["result two", "result three"]

    none_kept = build_prompt(three_rounds(), TranscriptView(keep_tool_results=0))
    assert all(m["content"].startswith("[older result") for m in none_kept if m["role"] == "tool")


def test_summary_replaces_the_messages_it_covers_and_the_system_prompt_stays() -> None:
    stored = three_rounds()
    stored.append({"role": SUMMARY_ROLE, "content": "old summary", "tool_calls": [], "seq": 9})
    stored.append({"role": "user", "content": "And then?", "tool_calls": [], "seq": 10})
    stored.append({"role": SUMMARY_ROLE, "content": "newest summary", "tool_calls": [], "seq": 11})
    stored.append({"role": "user", "content": "Go on.", "tool_calls": [], "seq": 12})
    messages = build_prompt(stored, TranscriptView(summary_upto=11))
    assert messages == [
        {"role": "system", "content": "You are helper."},
        {"role": "user", "content": "Summary of the conversation so far:\nnewest summary"},
        {"role": "user", "content": "Go on."},
    ]


def test_a_summary_with_nothing_after_it_asks_to_continue() -> None:
    stored = three_rounds()
    stored.append({"role": SUMMARY_ROLE, "content": "the summary", "tool_calls": [], "seq": 9})
    messages = build_prompt(stored, TranscriptView(summary_upto=9))
    assert [m["role"] for m in messages] == ["system", "user", "user"]
    assert messages[-1]["content"] == "Continue the task from the summary."


def test_summaries_after_the_view_are_not_used_and_never_sent_as_messages() -> None:
    stored = three_rounds()
    stored.append({"role": SUMMARY_ROLE, "content": "not yet adopted", "tool_calls": [], "seq": 9})
    messages = build_prompt(stored, TranscriptView(summary_upto=0))
    assert all("not yet adopted" not in str(m["content"]) for m in messages)
    assert all(m["role"] != SUMMARY_ROLE for m in messages)


def test_tool_results_are_never_orphaned_at_the_start() -> None:
    # The summary covered the assistant message that made the calls but not their results.
    stored = transcript(
        SYSTEM,
        USER,
        {"role": "assistant", "content": "", "tool_calls": [call("c1"), call("c2")]},
        {"role": SUMMARY_ROLE, "content": "searched twice", "tool_calls": []},
        tool("c1", "one"),
        tool("c2", "two"),
        {"role": "user", "content": "Anything else?"},
    )
    messages = build_prompt(stored, TranscriptView(summary_upto=4))
    assert [m["role"] for m in messages] == ["system", "user", "user"]
    assert messages[2]["content"] == "Anything else?"
    assert all(m["role"] != "tool" for m in messages)

    # With only orphans left after the summary, the model is asked to continue.
    only_orphans = build_prompt(stored[:6], TranscriptView(summary_upto=4))
    assert [m["role"] for m in only_orphans] == ["system", "user", "user"]
    assert only_orphans[-1]["content"] == "Continue the task from the summary."


def test_every_tool_result_follows_the_call_that_asked_for_it() -> None:
    stored = three_rounds()
    for upto in range(0, len(stored) + 1):
        messages = build_prompt(stored, TranscriptView(summary_upto=upto, keep_tool_results=1))
        open_calls: set[str] = set()
        for message in messages:
            if message["role"] == "assistant":
                open_calls = {c["id"] for c in message.get("tool_calls") or []}
            elif message["role"] == "tool":
                assert message["tool_call_id"] in open_calls, (upto, message)


def test_estimate_tokens_grows_with_content_and_is_never_zero() -> None:
    assert estimate_tokens([]) == 1
    short = estimate_tokens([{"role": "user", "content": "hi"}])
    long = estimate_tokens([{"role": "user", "content": "hi " * 400}])
    assert 1 <= short < long
    assert long >= 1200 // 4
