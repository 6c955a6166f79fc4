"""The same decision saved twice in a scope is one memory (real PostgreSQL + pgvector).

Content is compared case-folded, with whitespace collapsed and trimmed; the unique index of
migration 0006 keeps two saves that race each other to one row. Other scopes, and a retry of
the same save, behave as before.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from psycopg_pool import AsyncConnectionPool
from temporalio.testing import ActivityEnvironment

from activities.runtime import Runtime
from activities.store.db import get_pool
from activities.store.memory import list_memories, remember, saved_text
from activities.tools.tool_activities import run_tool
from config.agent import OFFLINE_EMBEDDING
from config.settings import Settings
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput

DECISION = "We chose Postgres 16 for the usage ledger."


@pytest.fixture
async def pool(db_settings: Settings) -> AsyncConnectionPool:
    return await get_pool(db_settings.require_database_url())


def scope_of(ws: str, key: str = "slack:CDUP", days: int = 30) -> MemoryScopeRef:
    return MemoryScopeRef(ws, "helper", "channel", key, OFFLINE_EMBEDDING, days)


def save_call(memory: MemoryScopeRef, content: str, key: str) -> ToolCallInput:
    return ToolCallInput(
        task_id=f"task-{key}",
        step=2,
        call_id="call-1",
        tool="memory.save",
        arguments={"content": content},
        idempotency_key=key,
        context=SurfaceContext(surface="slack", channel="CDUP", user="U1"),
        memory=memory,
        requested_by="U1",
    )


async def test_saving_the_same_decision_again_returns_the_stored_memory(pool: AsyncConnectionPool) -> None:
    ws = f"ws-{uuid.uuid4().hex[:10]}"
    scope = scope_of(ws)
    first, created = await remember(pool, scope, DECISION, "task-1", 1, f"{ws}:1")
    assert created
    for n, variant in enumerate(
        [
            DECISION,
            "  we chose POSTGRES 16\nfor the   usage ledger. ",
            "WE CHOSE postgres 16 for the usage ledger.",
        ]
    ):
        again = await remember(pool, scope, variant, f"task-{n + 2}", 1, f"{ws}:{n + 2}")
        assert again == (first, False)
    assert [m.content for m in await list_memories(pool, workspace=ws)] == [DECISION]
    # Another scope, or other words, are other memories.
    elsewhere, made = await remember(pool, scope_of(ws, "slack:COTHER"), DECISION, "task-9", 1, f"{ws}:9")
    assert made and elsewhere != first
    _, different = await remember(pool, scope, DECISION + " Reviewed in May.", "task-8", 1, f"{ws}:8")
    assert different
    assert len(await list_memories(pool, workspace=ws)) == 3


async def test_two_saves_of_the_same_content_at_once_leave_one_row(pool: AsyncConnectionPool) -> None:
    ws = f"ws-{uuid.uuid4().hex[:10]}"
    scope = scope_of(ws)
    variants = [DECISION, DECISION.upper(), f" {DECISION} ", DECISION.replace(" ", "  "), DECISION.lower()]

    async def save(n: int, text: str) -> tuple[str, bool]:
        async with pool.connection() as conn, conn.transaction():  # as memory.save writes
            return await remember(conn, scope, text, f"task-{n}", 1, f"{ws}:{n}")

    results = await asyncio.gather(*(save(n, text) for n, text in enumerate(variants * 2)))
    assert len({memory_id for memory_id, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert len(await list_memories(pool, workspace=ws)) == 1


async def test_an_expired_duplicate_is_replaced_not_returned(pool: AsyncConnectionPool) -> None:
    ws = f"ws-{uuid.uuid4().hex[:10]}"
    scope = scope_of(ws, days=1)
    old_at = datetime.now(UTC) - timedelta(days=3)
    stale, _ = await remember(pool, scope, DECISION, "task-1", 1, f"{ws}:1", created_at=old_at)
    fresh, created = await remember(pool, scope, DECISION, "task-2", 1, f"{ws}:2")
    assert created and fresh != stale
    assert [m.id for m in await list_memories(pool, workspace=ws, include_expired=True)] == [fresh]


async def test_the_save_tool_says_already_saved_and_its_retry_says_the_same(
    pool: AsyncConnectionPool, db_settings: Settings
) -> None:
    ws = f"ws-{uuid.uuid4().hex[:10]}"
    scope = scope_of(ws)
    env = ActivityEnvironment()
    first = await env.run(run_tool, save_call(scope, DECISION, f"{ws}-s1"))
    assert first.ok and first.output == f"Saved to channel memory: {DECISION}"
    assert await env.run(run_tool, save_call(scope, DECISION, f"{ws}-s1")) == first  # a retry

    today = datetime.now(UTC).date().isoformat()
    again = save_call(scope, "we chose postgres 16 for the usage ledger.", f"{ws}-s2")
    second = await env.run(run_tool, again)
    assert second.ok and second.output == f"Already saved to channel memory on {today}: {DECISION}"
    assert await env.run(run_tool, again) == second  # its retry reads the same
    assert len(await list_memories(pool, workspace=ws)) == 1
    rt = Runtime(db_settings)
    assert (await saved_text(rt, scope, DECISION, f"{ws}-s1")).startswith("Saved to")
