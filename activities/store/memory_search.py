"""Memory search: top-k by cosine similarity blended with recency, inside one scope partition.

Reads run as the row-level-security reader role (see the 0002 migration), so the database
itself hides every other partition. pgvector 0.6 filters an HNSW scan *after* it has picked
`ef_search` neighbours, so a scope holding 1% of the rows would come back nearly empty, and
0.6 has no iterative scan. Hence the per-scope strategy: a scope of up to
EXACT_SEARCH_MAX_ROWS rows is searched exactly (its btree index, then distances); a larger
one walks the HNSW index with `ef_search` sized from the scope's share of the rows (the
planner's statistics), widens it by the share the scan actually found if too few rows came
back, and falls back to exact search if that still yields fewer than k rows.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from activities.store.embeddings import Embeddings, embed
from config.agent import OFFLINE_EMBEDDING
from workflows.types import MemoryItem, MemoryScopeRef

SIMILARITY_WEIGHT = 0.8
RECENCY_WEIGHT = 0.2
RECENCY_HALF_LIFE_DAYS = 30.0
# Exact search costs a few microseconds a row; past this size HNSW is faster.
EXACT_SEARCH_MAX_ROWS = 2_000
CANDIDATES_PER_RESULT = 2  # rows fetched per result wanted, then re-ranked with recency
MIN_CANDIDATES = 20
HNSW_MIN_EF_SEARCH = 40  # pgvector's default
HNSW_MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
HNSW_MAX_SCANS = 3
HNSW_MAX_DIMS = 2000  # pgvector 0.6 cannot index more dimensions; larger models go exact
EF_MARGIN = 3.0  # neighbours beyond the scope share: recall@10 vs exact ~0.9 (bench)
SIZES_TTL_SECONDS = 300.0  # the planner's statistics change with ANALYZE, not per write
READER_ROLE = "openloop_memory_reader"
SCOPES = ("channel", "agent", "workspace")

ConnOrPool = AsyncConnection[Any] | AsyncConnectionPool
# How searches were answered (exact, hnsw, hnsw_widened, hnsw_fallback_exact): for the
# bench and tests, and a hint for tuning EXACT_SEARCH_MAX_ROWS.
STATS: Counter[str] = Counter()


@asynccontextmanager
async def connection(conn_or_pool: ConnOrPool) -> AsyncIterator[AsyncConnection[Any]]:
    if isinstance(conn_or_pool, AsyncConnectionPool):
        async with conn_or_pool.connection() as conn:
            yield conn
    else:
        yield conn_or_pool


def partition_of(scope: MemoryScopeRef) -> str:
    """The isolation key; must equal the `memory_partition` column the database computes."""
    if scope.scope not in SCOPES:
        raise ValueError(f"memory scope {scope.scope!r} is not one of {', '.join(SCOPES)}")
    if not scope.scope_key:
        raise ValueError(f"memory scope {scope.scope!r} needs a scope key")
    agent = "*" if scope.scope == "workspace" else scope.agent
    return f"{scope.workspace}/{scope.scope}/{agent}/{scope.scope_key}"


def vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def hnsw_index_name(model: str) -> str:
    """The model's partial HNSW index (the offline default's is created by the migration)."""
    if model == OFFLINE_EMBEDDING:
        return "memories_hnsw_offline_hashing_256"
    return "memories_hnsw_" + hashlib.sha256(model.encode()).hexdigest()[:16]


async def search(
    conn_or_pool: ConnOrPool,
    scope: MemoryScopeRef,
    query: str,
    k: int,
    *,
    exact_max_rows: int = EXACT_SEARCH_MAX_ROWS,
) -> list[MemoryItem]:
    """The k best memories of `scope` for `query` (similarity blended with recency)."""
    items, _ = await search_with_usage(conn_or_pool, scope, query, k, exact_max_rows=exact_max_rows)
    return items


async def search_with_usage(
    conn_or_pool: ConnOrPool,
    scope: MemoryScopeRef,
    query: str,
    k: int,
    *,
    exact_max_rows: int = EXACT_SEARCH_MAX_ROWS,
) -> tuple[list[MemoryItem], Embeddings | None]:
    """`search`, also returning the embedding call (for the usage ledger)."""
    partition = partition_of(scope)
    if k <= 0:
        return [], None
    emb = await embed(scope.embedding, [query or " "])
    wanted = max(k * CANDIDATES_PER_RESULT, MIN_CANDIDATES)
    probe = _Probe(emb.model, emb.dims, vector_literal(emb.vectors[0]), partition)
    async with connection(conn_or_pool) as conn:
        cur = conn.cursor(row_factory=dict_row)
        share = (await _sizes(cur)).share(partition, hnsw_index_name(emb.model), exact_max_rows)
        # SET LOCAL lasts to the end of the outermost transaction: if the caller's
        # connection is inside its own, hand it back as it was.
        nested = conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        async with conn.transaction():
            # From here on the database shows this transaction one partition, nothing else.
            # Sorting off makes the planner walk the HNSW index rather than sort a btree
            # scan of the scope; exact search cannot avoid its sort, so it is unaffected.
            await cur.execute(
                "SELECT set_config('role', %s, true), set_config('openloop.memory_partition',"
                " %s, true), set_config('hnsw.ef_search', %s, true),"
                " set_config('enable_sort', 'off', true)",
                (READER_ROLE, partition, str(_ef_for(wanted, share))),
            )
            in_scope, rows = await probe.exact_if_small(cur, exact_max_rows, wanted)
            if in_scope > exact_max_rows:
                if emb.dims <= HNSW_MAX_DIMS:
                    rows = await probe.approximate(cur, wanted, _ef_for(wanted, share))
                if len(rows) < k:
                    STATS["hnsw_fallback_exact"] += 1
                    rows = await probe.exact(cur, wanted)
            else:
                STATS["exact"] += 1
            if nested:
                await cur.execute(
                    "RESET ROLE; RESET enable_sort; RESET hnsw.ef_search;"
                    " SELECT set_config('openloop.memory_partition', '', true)"
                )
    return rank(rows, k, datetime.now(UTC)), emb


def _ef_for(wanted: int, share: float) -> int:
    """An ef_search expected to leave `wanted` rows of a scope holding `share` of the index."""
    if share <= 0:
        return HNSW_MAX_EF_SEARCH
    ef = math.ceil(wanted / share * EF_MARGIN)
    return max(HNSW_MIN_EF_SEARCH, min(ef, HNSW_MAX_EF_SEARCH))


@dataclass(frozen=True)
class _Probe:
    """The queries of one search; the model and dimension are literals so the planner can
    match the model's partial HNSW index (a bound parameter could not prove its predicate)."""

    model: str
    dims: int
    vector: str
    partition: str

    def _where(self) -> sql.Composed:
        return sql.SQL(
            "embedding_model = {} AND memory_partition = %(partition)s AND expires_at > now()"
        ).format(sql.Literal(self.model))

    def _exact_query(self, condition: str = "") -> sql.Composed:
        # Uncast `embedding` does not match the HNSW index expression, so this is exact.
        return sql.SQL(
            "SELECT id, content, created_at, source_task_id, embedding <=> %(vec)s::vector AS distance"
            " FROM memories WHERE {}{} ORDER BY distance LIMIT %(limit)s"
        ).format(self._where(), sql.SQL(condition))

    async def exact_if_small(self, cur: Any, max_rows: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
        """(rows in scope, capped at max_rows + 1; the exact top rows if within max_rows),
        in one round trip: the count bounds the scan, the lateral runs only for a small scope."""
        query = sql.SQL(
            "WITH scope AS (SELECT count(*) AS in_scope FROM"
            " (SELECT 1 FROM memories WHERE {where} LIMIT %(cap)s) capped)"
            " SELECT scope.in_scope, m.* FROM scope LEFT JOIN LATERAL ({exact}) m ON true"
        ).format(where=self._where(), exact=self._exact_query(" AND scope.in_scope < %(cap)s"))
        params = {
            "vec": self.vector,
            "partition": self.partition,
            "limit": limit,
            "cap": max_rows + 1,
        }
        await cur.execute(query, params, prepare=False)
        result = await cur.fetchall()
        return int(result[0]["in_scope"]), [row for row in result if row["id"] is not None]

    async def exact(self, cur: Any, limit: int) -> list[dict[str, Any]]:
        params = {"vec": self.vector, "partition": self.partition, "limit": limit}
        await cur.execute(self._exact_query(), params, prepare=False)
        return list(await cur.fetchall())

    async def approximate(self, cur: Any, wanted: int, ef: int) -> list[dict[str, Any]]:
        query = sql.SQL(
            "SELECT id, content, created_at, source_task_id,"
            " (embedding::vector({dims})) <=> %(vec)s::vector({dims}) AS distance"
            " FROM memories WHERE {where} ORDER BY distance LIMIT %(limit)s"
        ).format(dims=sql.Literal(self.dims), where=self._where())
        scans = 0
        while True:
            scans += 1
            params = {"vec": self.vector, "partition": self.partition, "limit": ef}
            await cur.execute(query, params, prepare=False)
            rows = list(await cur.fetchall())
            if len(rows) >= wanted or ef >= HNSW_MAX_EF_SEARCH or scans == HNSW_MAX_SCANS:
                break
            # pgvector 0.6 has no iterative scan: scan again with a neighbour set sized by
            # the share of neighbours this scope actually held.
            ef = _ef_for(wanted, len(rows) / ef)
            await cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
        STATS["hnsw" if scans == 1 else "hnsw_widened"] += 1
        return rows[:wanted]  # the nearest, as exact search would hand to the re-ranking


@dataclass(frozen=True)
class _Sizes:
    """Row counts from the planner's statistics: the table, each model's HNSW index, and the
    share of the table each large scope holds (its most common values)."""

    fetched_at: float
    all_rows: float
    index_rows: dict[str, float]
    partition_shares: dict[str, float]

    def share(self, partition: str, index: str, exact_max_rows: int) -> float:
        # A scope the statistics do not list yet counts as just over the exact-search limit.
        model_rows = self.index_rows.get(index) or self.all_rows or 1.0
        rows = max(self.partition_shares.get(partition, 0.0) * self.all_rows, exact_max_rows + 1)
        return min(1.0, rows / model_rows)


_SIZES_QUERY = """
SELECT (SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'memories'::regclass)
           AS all_rows,
       (SELECT json_object_agg(c.relname, greatest(c.reltuples, 0)) FROM pg_index x
            JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = 'memories'::regclass)
           AS index_rows,
       (SELECT json_object_agg(f.val, f.freq) FROM pg_stats s,
            unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS f(val, freq)
            WHERE s.schemaname = current_schema() AND s.tablename = 'memories'
                AND s.attname = 'memory_partition')
           AS partition_shares
"""
_sizes_cache: dict[str, _Sizes] = {}


async def _sizes(cur: Any) -> _Sizes:
    """The statistics, re-read every few minutes. Read as the connecting user: row-level
    security hides a table's statistics from the reader role."""
    info = cur.connection.info
    key = f"{info.host}:{info.port}/{info.dbname}"
    cached = _sizes_cache.get(key)
    if cached is not None and time.monotonic() - cached.fetched_at < SIZES_TTL_SECONDS:
        return cached
    await cur.execute(_SIZES_QUERY, prepare=False)
    row = await cur.fetchone()
    sizes = _Sizes(
        fetched_at=time.monotonic(),
        all_rows=float(row["all_rows"] or 0.0),
        index_rows={k: float(v) for k, v in (row["index_rows"] or {}).items()},
        partition_shares={k: float(v) for k, v in (row["partition_shares"] or {}).items()},
    )
    _sizes_cache[key] = sizes
    return sizes


def forget_cached_sizes() -> None:
    """Drop the cached statistics (after a bulk load and ANALYZE, say)."""
    _sizes_cache.clear()


def rank(rows: list[dict[str, Any]], k: int, now: datetime) -> list[MemoryItem]:
    """Blend similarity (1 - cosine distance) with recency (halving every half-life)."""
    scored: list[tuple[float, dict[str, Any]]] = []
    for row in rows:
        age_days = max((now - row["created_at"]).total_seconds(), 0.0) / 86400.0
        recency = math.pow(0.5, age_days / RECENCY_HALF_LIFE_DAYS)
        similarity = 1.0 - float(row["distance"])
        scored.append((SIMILARITY_WEIGHT * similarity + RECENCY_WEIGHT * recency, row))
    scored.sort(key=lambda pair: (-pair[0], -pair[1]["id"]))
    return [
        MemoryItem(
            id=str(row["id"]),
            content=str(row["content"]),
            created_at_iso=row["created_at"].isoformat(),
            score=round(score, 6),
            source_task_id=str(row.get("source_task_id") or ""),
        )
        for score, row in scored[:k]
    ]
