"""Memory recall benchmark: `python -m bench.memory_recall [--rows 100000]`.

Starts its own embedded PostgreSQL + pgvector in a temp dir, loads memories across many
scopes with the offline embedder (one scope holds 40% of the rows, one holds 1%, the rest
are spread over hundreds of channels), then measures:

- bulk load rate (COPY, then the HNSW index build) and the per-call `remember` rate with
  the index live (one transaction per memory, as tasks write them);
- recall latency p50/p95 through `search` (embedding + scoped SQL, the recall activity's
  path) for the large scope and the 1% scope, how many rows came back (always k), the
  strategy used, and for the large scope the overlap with an exact search (recall@k).

Prints a summary and writes bench/results/memory_recall.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from activities.store import memory_search
from activities.store.db import apply_migrations, close_pools, get_pool
from activities.store.embeddings import hashing_embedding
from activities.store.memory import remember
from activities.store.memory_search import search, vector_literal
from config.agent import OFFLINE_EMBEDDING
from workers.embedded import EmbeddedPostgres
from workflows.types import MemoryScopeRef

RESULTS = Path(__file__).parent / "results" / "memory_recall.json"
TOPICS = 60
TOPIC_WORDS = 30
FILLER_WORDS = 300
BIG_SHARE = 40  # percent of rows in the large scope
SMALL_SHARE = 1  # percent of rows in the small scope
OTHER_SCOPES = 590
_COLUMNS = (
    "workspace, agent, scope, scope_key, content, embedding_model, embedding_dims, embedding,"
    " source_task_id, source_step, idempotency_key, created_at, expires_at"
)


class Corpus:
    """Deterministic synthetic memories: topic words mixed with common filler words."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.topics = [[f"t{t}w{i}" for i in range(TOPIC_WORDS)] for t in range(TOPICS)]
        self.filler = [f"f{i}" for i in range(FILLER_WORDS)]

    def sentence(self) -> str:
        topic = self.topics[self.rng.randrange(TOPICS)]
        words = self.rng.randint(8, 14)
        return " ".join(
            self.rng.choice(topic) if self.rng.random() < 0.6 else self.rng.choice(self.filler)
            for _ in range(words)
        )


def scope_ref(key: str) -> MemoryScopeRef:
    return MemoryScopeRef("bench", "bench", "channel", key, OFFLINE_EMBEDDING, 90)


def scope_for(i: int) -> str:
    slot = i % 100
    if slot < BIG_SHARE:
        return "slack:C-BIG"
    if slot < BIG_SHARE + SMALL_SHARE:
        return "slack:C-ONE-PCT"
    return f"slack:C{i % OTHER_SCOPES:04d}"


def bulk_load(url: str, rows: int, corpus: Corpus) -> dict[str, float]:
    import psycopg

    now = datetime.now(UTC)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX IF EXISTS memories_hnsw_offline_hashing_256")
        started = time.perf_counter()
        with conn.cursor().copy(f"COPY memories ({_COLUMNS}) FROM STDIN") as copy:
            for i in range(rows):
                text = corpus.sentence()
                created = now - timedelta(minutes=corpus.rng.randrange(60 * 24 * 60))
                copy.write_row(
                    (
                        "bench",
                        "bench",
                        "channel",
                        scope_for(i),
                        text,
                        OFFLINE_EMBEDDING,
                        256,
                        vector_literal(hashing_embedding(text)),
                        f"bench-{i // 10}",
                        i % 10,
                        f"bench:{i}",
                        created,
                        created + timedelta(days=90),
                    )
                )
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '512MB'")
        # The same index the migration creates, built once over the loaded rows.
        conn.execute(
            "CREATE INDEX memories_hnsw_offline_hashing_256 ON memories USING hnsw"
            " ((embedding::vector(256)) vector_cosine_ops)"
            " WHERE embedding_model = 'offline/hashing-256'"
        )
        indexed = time.perf_counter() - started
        conn.execute("VACUUM ANALYZE memories")  # what autovacuum would do after a load
    return {
        "bulk_rows_per_s": round(rows / loaded, 1),
        "bulk_load_s": round(loaded, 2),
        "hnsw_build_s": round(indexed, 2),
    }


async def remember_rate(url: str, count: int, corpus: Corpus) -> float:
    pool = await get_pool(url)
    started = time.perf_counter()
    for i in range(count):
        scope = scope_ref(f"slack:C{corpus.rng.randrange(OTHER_SCOPES):04d}")
        await remember(pool, scope, corpus.sentence(), f"live-{i}", 0, f"live:{i}")
    return round(count / (time.perf_counter() - started), 1)


async def measure(url: str, key: str, queries: list[str], k: int) -> dict[str, object]:
    pool = await get_pool(url)
    scope = scope_ref(key)
    for query in queries[:10]:  # warm the caches the way a running worker has them
        await search(pool, scope, query, k)
    memory_search.STATS.clear()
    latencies: list[float] = []
    counts: list[int] = []
    for query in queries:
        started = time.perf_counter()
        items = await search(pool, scope, query, k)
        latencies.append((time.perf_counter() - started) * 1000)
        counts.append(len(items))
    latencies.sort()
    result: dict[str, object] = {
        "scope": key,
        "queries": len(queries),
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1], 2),
        "max_ms": round(latencies[-1], 2),
        "min_rows_returned": min(counts),
        "k": k,
        "strategies": dict(memory_search.STATS),
    }
    if key == "slack:C-BIG":
        result["recall_at_k_vs_exact"] = await overlap_with_exact(pool, scope, queries[:50], k)
    return result


async def overlap_with_exact(pool: object, scope: MemoryScopeRef, queries: list[str], k: int) -> float:
    """Share of the exact top-k (by the same blended score) that the default search found."""
    found = 0
    for query in queries:
        approx = {i.id for i in await search(pool, scope, query, k)}  # type: ignore[arg-type]
        exact = await search(pool, scope, query, k, exact_max_rows=10**9)  # type: ignore[arg-type]
        found += len(approx & {i.id for i in exact})
    return round(found / (k * len(queries)), 3)


async def run(args: argparse.Namespace) -> dict[str, object]:
    corpus = Corpus(args.seed)
    with tempfile.TemporaryDirectory(prefix="olb") as tmp:  # short: the socket lives here
        postgres = EmbeddedPostgres(Path(tmp) / "pg")
        url = postgres.start()
        try:
            apply_migrations(url)
            load = bulk_load(url, args.rows, corpus)
            live = await remember_rate(url, args.live_inserts, corpus)
            queries = [corpus.sentence() for _ in range(args.queries)]
            big = await measure(url, "slack:C-BIG", queries, args.k)
            small = await measure(url, "slack:C-ONE-PCT", queries, args.k)
        finally:
            await close_pools()
            postgres.stop()
    return {
        "rows": args.rows,
        "embedding": OFFLINE_EMBEDDING,
        **load,
        "remember_rows_per_s_with_index": live,
        "remember_rows": args.live_inserts,
        "recall_large_scope": big,
        "recall_1pct_scope": small,
        "target_p95_ms": 20,
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
        },
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--live-inserts", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    report = asyncio.run(run(args))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"rows loaded: {report['rows']:,} at {report['bulk_rows_per_s']:,} rows/s (COPY);"
        f" HNSW build {report['hnsw_build_s']} s"
    )
    print(f"remember() with the index live: {report['remember_rows_per_s_with_index']} rows/s")
    for name in ("recall_large_scope", "recall_1pct_scope"):
        r = report[name]
        assert isinstance(r, dict)
        print(
            f"{name}: p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms, max {r['max_ms']} ms,"
            f" min rows {r['min_rows_returned']}/{r['k']}, strategies {r['strategies']}"
            + (f", recall@k vs exact {r['recall_at_k_vs_exact']}" if "recall_at_k_vs_exact" in r else "")
        )
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
