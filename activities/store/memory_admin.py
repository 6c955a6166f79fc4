"""The operator side of agent memory: `StoredMemory` rows, `list_memories`, `forget` (one
memory, audited in the same transaction) and `purge_expired` (one batch of expired rows, for
the retention activity). Re-exported by `activities.store.memory`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from activities.store.memory_search import ConnOrPool, connection
from workflows.types import AuditEvent

PURGE_BATCH_ROWS = 5_000


@dataclass(frozen=True)
class StoredMemory:
    id: str
    workspace: str
    agent: str
    scope: str
    scope_key: str
    content: str
    embedding_model: str
    source_task_id: str
    source_step: int
    created_at: datetime
    expires_at: datetime


_STORED_COLUMNS = (
    "id, workspace, agent, scope, scope_key, content, embedding_model, source_task_id,"
    " source_step, created_at, expires_at"
)


def _stored(row: dict[str, Any]) -> StoredMemory:
    return StoredMemory(**{**row, "id": str(row["id"])})


async def list_memories(
    conn_or_pool: ConnOrPool,
    *,
    workspace: str | None = None,
    agent: str | None = None,
    scope: str | None = None,
    scope_key: str | None = None,
    limit: int = 50,
    include_expired: bool = False,
) -> list[StoredMemory]:
    """Memories newest first, filtered by any of the given fields (for operators)."""
    clauses: list[str] = [] if include_expired else ["expires_at > now()"]
    params: dict[str, Any] = {"limit": max(1, min(limit, 10_000))}
    for column, value in (
        ("workspace", workspace),
        ("agent", agent),
        ("scope", scope),
        ("scope_key", scope_key),
    ):
        if value:
            clauses.append(f"{column} = %({column})s")
            params[column] = value
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    async with connection(conn_or_pool) as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            f"SELECT {_STORED_COLUMNS} FROM memories {where}"
            " ORDER BY created_at DESC, id DESC LIMIT %(limit)s",
            params,
        )
        return [_stored(row) for row in await cur.fetchall()]


async def forget(
    conn_or_pool: ConnOrPool, memory_id: str, actor: str, reason: str = ""
) -> StoredMemory | None:
    """Delete one memory and audit who did it, in one transaction; None if it did not exist."""
    from activities.store.ledger import write_audit

    if not memory_id.isdigit():
        return None
    async with connection(conn_or_pool) as conn, conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            f"DELETE FROM memories WHERE id = %s RETURNING {_STORED_COLUMNS}", (int(memory_id),)
        )
        row = await cur.fetchone()
        if row is None:
            return None
        gone = _stored(row)
        await write_audit(
            conn,
            AuditEvent(
                task_id="operator",
                step=0,
                key=f"memory.forget:{gone.id}",
                agent=gone.agent,
                workspace=gone.workspace,
                channel=gone.scope_key if gone.scope == "channel" else "",
                kind="memory_forgotten",
                actor=actor,
                tool="memory.forget",
                arguments={
                    "memory_id": gone.id,
                    "scope": gone.scope,
                    "scope_key": gone.scope_key,
                    "content": gone.content,
                    "reason": reason,
                },
                outcome="deleted",
            ),
        )
        return gone


async def purge_expired(conn_or_pool: ConnOrPool, batch_size: int = PURGE_BATCH_ROWS) -> int:
    """Delete one batch of expired memories; returns how many went."""
    async with connection(conn_or_pool) as conn:
        cursor = await conn.execute(
            "DELETE FROM memories WHERE id IN (SELECT id FROM memories WHERE expires_at <= now()"
            " ORDER BY expires_at LIMIT %s FOR UPDATE SKIP LOCKED)",
            (batch_size,),
        )
        return cursor.rowcount
