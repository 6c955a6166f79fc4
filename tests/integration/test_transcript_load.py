"""The transcript store on real Postgres: `load_for_prompt` gives the same prompt as a full
`load` while reading only what the prompt uses, and `append` writes (and rewrites on retry)
several messages at once.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg_pool import AsyncConnectionPool

from activities.llm.compaction import build_prompt
from activities.store import transcript
from activities.store.db import get_pool
from activities.store.transcript import PLACEHOLDER_PREVIEW_CHARS, SUMMARY_ROLE
from workflows.types import TranscriptView

KEEPS = (-1, 0, 1, 2, 6, 1000)


def new_task() -> str:
    return f"task-{uuid.uuid4().hex[:12]}"


def msg(role: str, content: Any = "", **extra: Any) -> dict[str, Any]:
    """A stored message as `transcript.message_to_row` writes it."""
    return {
        "role": role,
        "content": content,
        "tool_call_id": None,
        "name": None,
        "tool_calls": [],
        "content_ref": None,
        **extra,
    }


def calls(*ids: str) -> dict[str, Any]:
    made = [{"id": i, "name": "memory__search", "arguments": '{"query": "x"}'} for i in ids]
    return msg("assistant", "", tool_calls=made)


def result(call_id: str, content: Any, name: str | None = "memory__search") -> dict[str, Any]:
    return msg("tool", content, tool_call_id=call_id, name=name)


async def stored_task(pool: AsyncConnectionPool, messages: list[dict[str, Any]]) -> str:
    task_id = new_task()
    async with pool.connection() as conn:
        assert await transcript.append(conn, task_id, 1, messages) == len(messages)
    return task_id


def compacted_seqs(full: list[dict[str, Any]], view: TranscriptView) -> set[int]:
    """The seqs of the tool results `build_prompt` turns into placeholders."""
    marked = [{**row, "content": str(row["seq"])} if row["role"] == "tool" else row for row in full]
    tools = [m["content"] for m in build_prompt(marked, view) if m["role"] == "tool"]
    found = (re.search(r"compacted: (\d+)…\]\n</untrusted-data>$", content) for content in tools)
    return {int(match.group(1)) for match in found if match}


async def assert_same_prompt(
    pool: AsyncConnectionPool, task_id: str, upto: int, view: TranscriptView
) -> list[dict[str, Any]]:
    async with pool.connection() as conn:
        full = await transcript.load(conn, task_id, upto)
        partial = await transcript.load_for_prompt(conn, task_id, upto, view)
    assert build_prompt(partial, view) == build_prompt(full, view), (upto, view)
    assert [row["seq"] for row in partial] == sorted({row["seq"] for row in partial})
    # Each row read is the stored one, but for placeholders' content: only their preview.
    whole = {row["seq"]: row for row in full}
    compacted = compacted_seqs(full, view)
    for row in partial:
        stored = whole[row["seq"]]
        if row["seq"] in compacted and isinstance(stored["content"], str):
            stored = {**stored, "content": stored["content"][:PLACEHOLDER_PREVIEW_CHARS]}
        assert row == stored, (upto, view)
    return partial


def long_task() -> list[dict[str, Any]]:
    """system, user, then rounds of one or two calls; a summary after round 3; 1-based seqs."""
    rows = [msg("system", "You are helper."), msg("user", "Find the decision.")]
    for n in range(8):
        ids = [f"c{n}a", f"c{n}b"] if n % 3 == 0 else [f"c{n}"]
        rows.append(calls(*ids))
        rows.extend(result(i, f"result {i} " + "é日🙂x" * (40 * (n + 1))) for i in ids)
        if n == 3:
            rows.append(msg("user", "Summarise."))
            rows.append(msg(SUMMARY_ROLE, "searched four times"))
    rows.append(msg("user", "Anything else?"))
    return rows


@pytest.mark.parametrize(
    ("summary_at", "upto_at"),
    [
        ("none", "end"),  # no summary
        ("summary", "end"),  # the summary adopted by the view
        ("before summary", "end"),  # a summary row stored past the view is not used
        ("mid tools", "end"),  # the view ends between two results: leading tool rows
        ("none", "cut"),  # upto leaves out the newest rows
        ("summary", "before summary"),  # upto ends before the summary row
    ],
)
async def test_prompt_is_the_same_as_from_a_full_load(pg_url: str, summary_at: str, upto_at: str) -> None:
    pool = await get_pool(pg_url)
    rows = long_task()
    task_id = await stored_task(pool, rows)
    summary_seq = next(i for i, m in enumerate(rows, 1) if m["role"] == SUMMARY_ROLE)
    # Seq 3 is the assistant of round 0 and 4-5 its two results.
    summary_upto = {"none": 0, "summary": summary_seq, "before summary": 8, "mid tools": 4}[summary_at]
    upto = {"end": len(rows), "cut": len(rows) - 4, "before summary": summary_seq - 2}[upto_at]
    for keep in KEEPS:
        partial = await assert_same_prompt(pool, task_id, upto, TranscriptView(summary_upto, keep))
        assert partial and all(row["seq"] <= upto for row in partial)
        if summary_at == "mid tools":
            assert 5 not in {row["seq"] for row in partial}, "an orphaned tool result was read"
        if summary_at == "summary" and upto >= summary_seq:
            # Only the system row and the summary are read from before the view.
            assert [r["seq"] for r in partial if r["seq"] <= summary_upto] == [1, summary_seq]


async def test_tool_results_it_compacts_are_read_only_up_to_their_preview(pg_url: str) -> None:
    pool = await get_pool(pg_url)
    huge = "L" * 50_000
    rows = [msg("system", "You are helper."), msg("user", "Read the logs.")]
    for n in range(8):
        rows += [calls(f"c{n}"), result(f"c{n}", f"{n}:" + huge)]
    task_id = await stored_task(pool, rows)
    view = TranscriptView(summary_upto=0, keep_tool_results=2)
    partial = await assert_same_prompt(pool, task_id, len(rows), view)
    tools = [row for row in partial if row["role"] == "tool"]
    assert len(tools) == 8
    for row in tools[:6]:
        assert len(row["content"]) == PLACEHOLDER_PREVIEW_CHARS
        assert row["tool_call_id"] and row["name"] == "memory__search"
    assert [len(row["content"]) for row in tools[6:]] == [50_002, 50_002]
    shipped = sum(len(json.dumps(row)) for row in partial)
    assert shipped < 2 * 50_002 + 4_000


async def test_keep_larger_than_the_tool_results_reads_them_all_whole(pg_url: str) -> None:
    pool = await get_pool(pg_url)
    rows = [msg("system", "s"), msg("user", "u"), calls("a", "b"), result("a", "A" * 500), result("b", "B")]
    task_id = await stored_task(pool, rows)
    partial = await assert_same_prompt(pool, task_id, 5, TranscriptView(keep_tool_results=3))
    assert [row["content"] for row in partial[3:]] == ["A" * 500, "B"]


async def test_odd_rows_give_the_same_prompt(pg_url: str) -> None:
    """No system row, a second system row, non-string contents, summaries past the view."""
    pool = await get_pool(pg_url)
    rows = [
        msg("user", "u"),
        calls("a", "b"),
        result("a", None),
        result("b", 12345, name=None),
        msg("system", "late system"),
        msg(SUMMARY_ROLE, "s1"),
        calls("c"),
        result("c", ["not", "a", "string"]),
        msg("system", "another"),
        msg(SUMMARY_ROLE, "s2"),
        result("d", "orphan"),
        msg("user", "go"),
    ]
    task_id = await stored_task(pool, rows)
    for summary_upto in range(len(rows) + 2):
        for upto in range(len(rows) + 1):
            for keep in (0, 1):
                await assert_same_prompt(pool, task_id, upto, TranscriptView(summary_upto, keep))


TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=120)
CONTENT = st.one_of(TEXT, st.builds(lambda c, n: c * n, st.sampled_from("xé日🙂"), st.integers(0, 400)))
BLOCK = st.one_of(
    st.builds(lambda t: [msg("user", t)], TEXT),
    st.builds(
        lambda contents: (
            [calls(*[f"k{i}" for i in range(len(contents))])]
            + [result(f"k{i}", c) for i, c in enumerate(contents)]
        ),
        st.lists(CONTENT, max_size=4),
    ),
    st.builds(lambda t: [msg("user", "Summarise."), msg(SUMMARY_ROLE, t)], TEXT),
    st.builds(lambda t: [msg("system", t)], TEXT),
    st.builds(lambda c: [result("orphan", c)], CONTENT),
)


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    starts_with_system=st.booleans(),
    blocks=st.lists(BLOCK, max_size=12),
    cuts=st.lists(st.integers(0, 60), min_size=2, max_size=2),
)
async def test_any_transcript_and_view_give_the_same_prompt(
    pg_url: str, starts_with_system: bool, blocks: list[list[dict[str, Any]]], cuts: list[int]
) -> None:
    pool = await get_pool(pg_url)
    rows = [msg("system", "You are helper.")] if starts_with_system else []
    rows += [row for block in blocks for row in block]
    task_id = await stored_task(pool, rows)
    summaries = [seq for seq, row in enumerate(rows, 1) if row["role"] == SUMMARY_ROLE]
    for summary_upto in {0, cuts[0], *summaries}:
        for upto in {len(rows), cuts[1]}:
            for keep in KEEPS:
                await assert_same_prompt(pool, task_id, upto, TranscriptView(summary_upto, keep))


async def test_append_writes_several_rows_and_a_retry_overwrites_them(pg_url: str) -> None:
    pool = await get_pool(pg_url)
    task_id = new_task()
    async with pool.connection() as conn:
        first = [msg("system", "s"), msg("user", "u"), calls("a"), result("a", "first try")]
        assert await transcript.append(conn, task_id, 1, first) == 4
        assert await transcript.append(conn, task_id, 5, []) == 4
        assert [{**m, "seq": s} for s, m in enumerate(first, 1)] == await transcript.load(conn, task_id, 10)
        # The retried attempt rewrites seqs 3-4 with what it got, role included.
        retry = [msg("user", "changed my mind"), msg("assistant", "done")]
        assert await transcript.append(conn, task_id, 3, retry) == 4
        loaded = await transcript.load(conn, task_id, 10)
        assert [(r["seq"], r["role"], r["content"]) for r in loaded] == [
            (1, "system", "s"),
            (2, "user", "u"),
            (3, "user", "changed my mind"),
            (4, "assistant", "done"),
        ]
        columns = await (
            await conn.execute("SELECT seq, role FROM transcript WHERE task_id = %s ORDER BY seq", (task_id,))
        ).fetchall()
        assert [(c["seq"], c["role"]) for c in columns] == [
            (1, "system"),
            (2, "user"),
            (3, "user"),
            (4, "assistant"),
        ]


async def test_append_takes_part_in_the_callers_transaction(pg_url: str) -> None:
    pool = await get_pool(pg_url)
    task_id = new_task()
    async with pool.connection() as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await transcript.append(conn, task_id, 1, [msg("user", "a"), msg("user", "b")])
                raise RuntimeError("the usage row failed")
        assert await transcript.load(conn, task_id, 10) == []
