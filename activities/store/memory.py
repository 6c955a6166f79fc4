"""Agent memory on PostgreSQL + pgvector: `remember`, the `recall` activity, `search`,
`list_memories`, `forget` (audited) and the retention purge (`purge_expired` and its
activity, run daily by the `MemoryRetentionWorkflow` schedule).

Every row carries workspace, agent, scope, scope key, content, its source (workflow id +
step), the embedding model that made its vector, created and expiry times. How recall keeps
to one scope and still returns k rows from a small scope is in `activities.store.memory_search`.
The operator side (list, forget, purge) is in `activities.store.memory_admin`.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.pq import TransactionStatus

from activities.runtime import Runtime
from activities.store.embeddings import Embeddings, embed
from activities.store.memory_admin import PURGE_BATCH_ROWS, StoredMemory, forget, list_memories, purge_expired
from activities.store.memory_search import (
    HNSW_MAX_DIMS,
    ConnOrPool,
    connection,
    hnsw_index_name,
    partition_of,
    search,
    search_with_usage,
    vector_literal,
)
from config.agent import OFFLINE_EMBEDDING
from workflows.types import MemoryScopeRef

__all__ = [
    "PURGE_BATCH_ROWS",
    "StoredMemory",
    "content_key",
    "ensure_model_index",
    "forget",
    "list_memories",
    "partition_of",
    "purge_expired",
    "remember",
    "remember_with_usage",
    "saved_text",
    "search",
    "search_with_usage",
]

MAX_CONTENT_CHARS = 4000
_indexed: set[tuple[str, int]] = {(OFFLINE_EMBEDDING, 256)}  # created by the migration


async def ensure_model_index(conn: AsyncConnection[Any], model: str, dims: int) -> None:
    """Give `model` its own partial HNSW index at its dimension (once per process)."""
    if (model, dims) in _indexed or dims > HNSW_MAX_DIMS:
        return
    name = hnsw_index_name(model)
    exists = await conn.execute("SELECT 1 FROM pg_class WHERE relname = %s", (name,))
    if await exists.fetchone() is None:
        async with conn.transaction():
            # Two workers meeting a new model together must not race on the index name.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name,))
            await conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON memories USING hnsw "
                    "((embedding::vector({})) vector_cosine_ops) WHERE embedding_model = {}"
                ).format(sql.Identifier(name), sql.Literal(dims), sql.Literal(model))
            )
        if conn.info.transaction_status != TransactionStatus.IDLE:
            return  # made inside the caller's transaction, which may still roll back
    _indexed.add((model, dims))


def content_key(content: str) -> str:
    """What makes two memories the same: the content case-folded, whitespace collapsed and
    trimmed, hashed (the `content_key` column, unique per scope since migration 0006)."""
    return hashlib.sha256(" ".join(content.casefold().split()).encode()).hexdigest()


async def remember(
    conn_or_pool: ConnOrPool,
    scope: MemoryScopeRef,
    content: str,
    source_task_id: str,
    source_step: int,
    idempotency_key: str,
    *,
    created_at: datetime | None = None,
) -> tuple[str, bool]:
    """Store `content` in `scope`; returns (memory id, created). A retry finds its first row,
    and content already in the scope (same `content_key`) returns that memory, created False."""
    memory_id, created, _ = await remember_with_usage(
        conn_or_pool,
        scope,
        content,
        source_task_id,
        source_step,
        idempotency_key,
        created_at=created_at,
    )
    return memory_id, created


async def remember_with_usage(
    conn_or_pool: ConnOrPool,
    scope: MemoryScopeRef,
    content: str,
    source_task_id: str,
    source_step: int,
    idempotency_key: str,
    *,
    created_at: datetime | None = None,
) -> tuple[str, bool, Embeddings | None]:
    """`remember`, also returning the embedding call (None when the row already existed)."""
    content = content.strip()
    if not content:
        raise ValueError("memory content is empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValueError(f"memory content is {len(content)} characters; at most {MAX_CONTENT_CHARS}")
    partition = partition_of(scope)  # validates scope and key before any work
    key = idempotency_key or f"{source_task_id}:{source_step}"
    same = content_key(content)
    async with connection(conn_or_pool) as conn:
        existing = await _id_for_key(conn, key)
        if existing is not None:  # a retry: skip the (possibly paid) embedding call
            return existing, False, None
        duplicate = await _id_for_content(conn, partition, same)
        if duplicate is not None:  # saved before in this scope: no second row, no embedding
            return duplicate, False, None
        emb = await embed(scope.embedding, [content])
        await ensure_model_index(conn, emb.model, emb.dims)
        cursor = await conn.execute(
            "INSERT INTO memories (workspace, agent, scope, scope_key, content, embedding_model,"
            " embedding_dims, embedding, source_task_id, source_step, idempotency_key,"
            " content_key, created_at, expires_at)"
            " VALUES (%(ws)s, %(agent)s, %(scope)s, %(key)s, %(content)s, %(model)s, %(dims)s,"
            " %(vec)s::vector, %(task)s, %(step)s, %(idem)s, %(same)s, COALESCE(%(at)s, now()),"
            " COALESCE(%(at)s, now()) + make_interval(days => %(days)s))"
            # Either unique index: a racing retry (same key) or a racing save of the same
            # content in this scope (same content_key) inserted it first.
            " ON CONFLICT DO NOTHING RETURNING id",
            {
                "ws": scope.workspace,
                "agent": scope.agent,
                "scope": scope.scope,
                "key": scope.scope_key,
                "content": content,
                "model": emb.model,
                "dims": emb.dims,
                "vec": vector_literal(emb.vectors[0]),
                "task": source_task_id,
                "step": source_step,
                "idem": key,
                "same": same,
                "at": created_at,
                "days": scope.retention_days,
            },
        )
        row = await cursor.fetchone()
        if row is not None:
            return str(_first(row)), True, emb
        raced = await _id_for_key(conn, key) or await _id_for_content(conn, partition, same)
        assert raced is not None
        return raced, False, emb


async def _id_for_key(conn: AsyncConnection[Any], key: str) -> str | None:
    cursor = await conn.execute("SELECT id FROM memories WHERE idempotency_key = %s", (key,))
    row = await cursor.fetchone()
    return None if row is None else str(_first(row))


async def _id_for_content(conn: AsyncConnection[Any], partition: str, same: str) -> str | None:
    """The scope's memory with this content. An expired one (not yet purged) is deleted, so
    the new save replaces it instead of returning a memory recall no longer shows."""
    await conn.execute(
        "DELETE FROM memories WHERE memory_partition = %s AND content_key = %s AND expires_at <= now()",
        (partition, same),
    )
    cursor = await conn.execute(
        "SELECT id FROM memories WHERE memory_partition = %s AND content_key = %s", (partition, same)
    )
    row = await cursor.fetchone()
    return None if row is None else str(_first(row))


async def saved_text(rt: Runtime, scope: MemoryScopeRef, content: str, idempotency_key: str) -> str:
    """What `memory.save` tells the model: saved, or already saved (when and as what).

    Decided before the write and from rows other than this call's own, so a retried save
    (same idempotency key) reads the same as its first attempt.
    """
    try:
        partition = partition_of(scope)
    except ValueError:
        return f"Saved to {scope.scope} memory: {content}"  # the write reports the bad scope
    pool = await rt.pool()
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT content, created_at FROM memories WHERE memory_partition = %s"
            " AND content_key = %s AND idempotency_key <> %s AND expires_at > now()",
            (partition, content_key(content.strip()), idempotency_key),
        )
        row = await cursor.fetchone()
    if row is None:
        return f"Saved to {scope.scope} memory: {content}"
    found = row if isinstance(row, dict) else {"content": row[0], "created_at": row[1]}
    when = found["created_at"].date().isoformat()
    return f"Already saved to {scope.scope} memory on {when}: {found['content']}"


def _first(row: Any) -> Any:
    return next(iter(row.values())) if isinstance(row, dict) else row[0]
