"""Migrations: applied once each, idempotent, and safe when two processes run them together."""

from __future__ import annotations

import concurrent.futures

import psycopg

from activities.store.db import apply_migrations, migration_files


def test_every_migration_is_recorded_once(pg_url: str) -> None:
    assert apply_migrations(pg_url) == []  # the session fixture already applied them all
    with psycopg.connect(pg_url) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
    assert names == [path.name for path in migration_files()]


def test_concurrent_runs_apply_nothing_twice(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE name = %s", (migration_files()[-1].name,))
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(apply_migrations, [pg_url] * 4))
    # The re-opened migration runs in exactly one of the four (its SQL is re-runnable).
    assert sorted(len(r) for r in results) == [0, 0, 0, 1]


def test_pgvector_is_available(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert row is not None and row[0] >= "0.6"
