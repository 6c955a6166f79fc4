"""Memory on real PostgreSQL + pgvector: scoped recall, isolation in the database itself,
k rows from a 1% scope, idempotent writes, expiry, and per-model vectors.

Each test uses its own workspace name, so tests share one database safely.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool
from temporalio.testing import ActivityEnvironment

from activities.store import memory_search
from activities.store.db import get_pool
from activities.store.embeddings import hashing_embedding
from activities.store.memory import (
    forget,
    list_memories,
    purge_expired,
    remember,
    search,
)
from activities.store.memory_search import partition_of, vector_literal
from activities.store.store_activities import recall
from config.agent import OFFLINE_EMBEDDING
from config.settings import Settings
from workflows.types import MemoryScopeRef, RecallInput

FRIDAYS_YES = "Decision: we deploy to production on Fridays."
FRIDAYS_NO = "Decision: we never deploy to production on Fridays, only Tuesdays."


def ref(
    workspace: str,
    key: str,
    *,
    agent: str = "helper",
    scope: str = "channel",
    days: int = 30,
    model: str = OFFLINE_EMBEDDING,
) -> MemoryScopeRef:
    return MemoryScopeRef(workspace, agent, scope, key, model, days)


@pytest.fixture
async def pool(db_settings: Settings) -> AsyncConnectionPool:
    return await get_pool(db_settings.require_database_url())


@pytest.fixture
def ws() -> str:
    return f"ws-{uuid.uuid4().hex[:10]}"


async def bulk_insert(pool: AsyncConnectionPool, scope: MemoryScopeRef, texts: list[str]) -> None:
    """Rows straight into the table (the recall tests need volume, not `remember`)."""
    now = datetime.now(UTC)
    async with pool.connection() as conn, conn.cursor() as cur:
        async with cur.copy(
            "COPY memories (workspace, agent, scope, scope_key, content, embedding_model,"
            " embedding_dims, embedding, source_task_id, source_step, idempotency_key,"
            " created_at, expires_at) FROM STDIN"
        ) as copy:
            for text in texts:
                await copy.write_row(
                    (
                        scope.workspace,
                        scope.agent,
                        scope.scope,
                        scope.scope_key,
                        text,
                        OFFLINE_EMBEDDING,
                        256,
                        vector_literal(hashing_embedding(text)),
                        "bulk",
                        0,
                        f"bulk:{uuid.uuid4().hex}",
                        now,
                        now + timedelta(days=30),
                    )
                )


async def test_one_channel_never_recalls_another_channels_decision(
    pool: AsyncConnectionPool, ws: str
) -> None:
    yes, no = ref(ws, "slack:CYES"), ref(ws, "slack:CNO")
    await remember(pool, yes, FRIDAYS_YES, "task-1", 1, "task-1:1:save")
    await remember(pool, no, FRIDAYS_NO, "task-2", 1, "task-2:1:save")
    env = ActivityEnvironment()
    for scope, own, other in ((yes, FRIDAYS_YES, FRIDAYS_NO), (no, FRIDAYS_NO, FRIDAYS_YES)):
        result = await env.run(recall, RecallInput(scope, "Do we deploy on Fridays?", 5, "t"))
        assert [item.content for item in result.items] == [own]
        assert other not in str(result)


async def test_the_database_hides_other_partitions_from_the_reader_role(
    pool: AsyncConnectionPool, ws: str
) -> None:
    a, b = ref(ws, "slack:CA"), ref(ws, "slack:CB")
    await remember(pool, a, "secret plan of channel A", "t-a", 1, f"{ws}:a")
    await remember(pool, b, "roadmap of channel B", "t-b", 1, f"{ws}:b")
    async with pool.connection() as conn:
        async with conn.transaction():
            await conn.execute("SET LOCAL ROLE openloop_memory_reader")
            await conn.execute("SELECT set_config('openloop.memory_partition', %s, true)", (partition_of(b),))
            # No WHERE clause at all: the whole table shows channel B's row and nothing else.
            rows = await (await conn.execute("SELECT content FROM memories")).fetchall()
            assert [row["content"] for row in rows] == ["roadmap of channel B"]
            asked_for_a = await conn.execute(
                "SELECT content FROM memories WHERE memory_partition = %s", (partition_of(a),)
            )
            assert await asked_for_a.fetchall() == []
        async with conn.transaction():
            await conn.execute("SET LOCAL ROLE openloop_memory_reader")
            # No partition set: nothing at all.
            rows = await (await conn.execute("SELECT count(*) AS n FROM memories")).fetchall()
            assert rows == [{"n": 0}]
        for statement in ("DELETE FROM memories", "UPDATE memories SET content = 'x'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                async with conn.transaction():
                    await conn.execute("SET LOCAL ROLE openloop_memory_reader")
                    await conn.execute(statement)
        # Back on the pool's own role: the connection still sees everything.
        count = await conn.execute("SELECT count(*) AS n FROM memories WHERE workspace = %s", (ws,))
        assert (await count.fetchone()) == {"n": 2}
        # A search on a connection inside the caller's own transaction hands it back as it was.
        async with conn.transaction():
            assert [i.content for i in await search(conn, b, "roadmap", 5)] == ["roadmap of channel B"]
            who = await (await conn.execute("SELECT current_user AS u")).fetchone()
            assert who is not None and who["u"] != "openloop_memory_reader"
            count = await conn.execute("SELECT count(*) AS n FROM memories WHERE workspace = %s", (ws,))
            assert (await count.fetchone()) == {"n": 2}


@pytest.fixture(scope="module")
async def crowd(pg_url: str) -> AsyncIterator[tuple[MemoryScopeRef, MemoryScopeRef]]:
    """1,000 rows: one scope with 60% of them, one with 1% (10 rows), the rest spread out."""
    pool = await get_pool(pg_url)
    ws = f"crowd-{uuid.uuid4().hex[:8]}"
    big, small = ref(ws, "slack:CBIG"), ref(ws, "slack:CSMALL")
    topics = ["deploy", "database", "billing", "oncall", "design", "hiring"]

    def texts(n: int, tag: str) -> list[str]:
        return [f"{tag} note {i}: {topics[i % 6]} {topics[(i * 7) % 6]} item{i % 50}" for i in range(n)]

    await bulk_insert(pool, big, texts(600, "big"))
    await bulk_insert(pool, small, texts(10, "small"))
    for n in range(39):
        await bulk_insert(pool, ref(ws, f"slack:C{n:03d}"), texts(10, f"c{n}"))
    yield big, small


async def test_a_scope_with_one_percent_of_the_rows_still_returns_k(
    pool: AsyncConnectionPool, crowd: tuple[MemoryScopeRef, MemoryScopeRef]
) -> None:
    big, small = crowd
    query = vector_literal(hashing_embedding("deploy database item3"))
    # The hazard: an HNSW scan keeps ef_search (40) neighbours, then filters by scope.
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_sort = off")  # make the planner use HNSW
        await conn.execute("SET LOCAL hnsw.ef_search = 40")
        naive = await conn.execute(
            "SELECT id FROM memories WHERE embedding_model = 'offline/hashing-256'"
            " AND memory_partition = %s ORDER BY (embedding::vector(256)) <=> %s::vector(256)"
            " LIMIT 10",
            (partition_of(small), query),
        )
        assert len(await naive.fetchall()) < 10
    memory_search.STATS.clear()
    exact = await search(pool, small, "deploy database item3", 10)  # 10 rows: exact search
    assert len(exact) == 10 and memory_search.STATS["exact"] == 1
    assert all(item.content.startswith("small note") for item in exact)
    # The same scope forced down the HNSW path still comes back with k rows, the same ones.
    forced = await search(pool, small, "deploy database item3", 10, exact_max_rows=0)
    assert [i.id for i in forced] == [i.id for i in exact]
    assert memory_search.STATS["exact"] == 1  # no exact search was needed for that


async def test_stale_statistics_widen_the_hnsw_scan_instead_of_returning_less(
    pool: AsyncConnectionPool, crowd: tuple[MemoryScopeRef, MemoryScopeRef]
) -> None:
    _, small = crowd
    async with pool.connection() as conn:
        info = conn.info
    # Statistics that claim the 1% scope is the whole table: the first scan is far too narrow.
    memory_search._sizes_cache[f"{info.host}:{info.port}/{info.dbname}"] = memory_search._Sizes(
        fetched_at=1e18, all_rows=1000, index_rows={}, partition_shares={partition_of(small): 1.0}
    )
    try:
        memory_search.STATS.clear()
        items = await search(pool, small, "oncall billing", 10, exact_max_rows=5)
        assert len(items) == 10
        assert dict(memory_search.STATS) == {"hnsw_widened": 1}
        assert all(item.content.startswith("small note") for item in items)
    finally:
        memory_search.forget_cached_sizes()


async def test_remember_is_idempotent_per_workflow_step(pool: AsyncConnectionPool, ws: str) -> None:
    scope = ref(ws, "slack:CIDEM")
    first = await remember(pool, scope, "We chose Postgres 16.", "task-9", 3, "task-9:3:c1")
    again = await remember(pool, scope, "We chose Postgres 16.", "task-9", 3, "task-9:3:c1")
    assert first[1] is True and again == (first[0], False)
    # Retries racing each other still write one row.
    racing = await asyncio.gather(
        *(remember(pool, scope, "Retry storm", "task-9", 4, "task-9:4:c1") for _ in range(5))
    )
    assert len({memory_id for memory_id, _ in racing}) == 1
    assert sum(created for _, created in racing) == 1
    rows = await list_memories(pool, workspace=ws)
    assert sorted(r.content for r in rows) == ["Retry storm", "We chose Postgres 16."]
    assert {(r.source_task_id, r.source_step) for r in rows} == {("task-9", 3), ("task-9", 4)}


async def test_recency_is_blended_with_similarity(pool: AsyncConnectionPool, ws: str) -> None:
    scope = ref(ws, "slack:CREC", days=365)
    now = datetime.now(UTC)
    await remember(
        pool,
        scope,
        "The deploy window is Tuesday.",
        "t",
        1,
        f"{ws}:old",
        created_at=now - timedelta(days=120),
    )
    # Same words, so the same vector (the same text would be one memory: saved once per scope).
    await remember(
        pool, scope, "The deploy window is Tuesday!", "t", 2, f"{ws}:new", created_at=now - timedelta(hours=2)
    )
    await remember(pool, scope, "Lunch is at noon.", "t", 3, f"{ws}:lunch", created_at=now)
    items = await search(pool, scope, "when is the deploy window", 3)
    assert [item.content for item in items] == [
        "The deploy window is Tuesday!",
        "The deploy window is Tuesday.",
        "Lunch is at noon.",
    ]
    assert items[0].created_at_iso > items[1].created_at_iso  # the newer one first


async def test_expired_memories_are_not_recalled_and_get_purged(pool: AsyncConnectionPool, ws: str) -> None:
    scope = ref(ws, "slack:CEXP", days=1)
    now = datetime.now(UTC)
    stale, _ = await remember(
        pool, scope, "Old decision about caching.", "t", 1, f"{ws}:1", created_at=now - timedelta(days=3)
    )
    fresh, _ = await remember(pool, scope, "New decision about caching.", "t", 2, f"{ws}:2")
    assert [i.id for i in await search(pool, scope, "caching decision", 5)] == [fresh]
    assert {m.id for m in await list_memories(pool, workspace=ws, include_expired=True)} == {stale, fresh}
    assert await purge_expired(pool) >= 1
    assert [m.id for m in await list_memories(pool, workspace=ws, include_expired=True)] == [fresh]


async def test_workspace_memory_is_shared_channel_memory_is_per_agent(
    pool: AsyncConnectionPool, ws: str
) -> None:
    await remember(pool, ref(ws, ws, scope="workspace"), "Company holiday is May 1.", "t", 1, f"{ws}:w")
    await remember(pool, ref(ws, "slack:CSH"), "Channel note of helper.", "t", 2, f"{ws}:c")
    other_agent = await search(pool, ref(ws, ws, agent="other", scope="workspace"), "holiday", 5)
    assert [i.content for i in other_agent] == ["Company holiday is May 1."]
    assert await search(pool, ref(ws, "slack:CSH", agent="other"), "channel note", 5) == []
    other_ws = await search(pool, ref(f"{ws}x", f"{ws}x", scope="workspace"), "holiday", 5)
    assert other_ws == []


async def test_forget_deletes_and_audits(pool: AsyncConnectionPool, ws: str) -> None:
    scope = ref(ws, "slack:CFGT")
    memory_id, _ = await remember(pool, scope, "api_key rotation is monthly", "t", 1, f"{ws}:f")
    gone = await forget(pool, memory_id, "alice", reason="asked by legal")
    assert gone is not None and gone.content == "api_key rotation is monthly"
    assert await list_memories(pool, workspace=ws, include_expired=True) == []
    assert await forget(pool, memory_id, "alice") is None
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT actor, kind, tool, outcome, arguments_preview, arguments_sha256"
                " FROM audit_log WHERE key = %s",
                (f"memory.forget:{memory_id}",),
            )
        ).fetchall()
    assert len(rows) == 1
    row = rows[0]
    assert (row["actor"], row["kind"], row["tool"], row["outcome"]) == (
        "alice",
        "memory_forgotten",
        "memory.forget",
        "deleted",
    )
    assert row["arguments_preview"]["reason"] == "asked by legal"
    assert len(row["arguments_sha256"]) == 64
