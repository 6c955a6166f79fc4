"""The benches that bring up servers of their own, end to end at tiny sizes: memory recall
(its own PostgreSQL, enough rows that the large scope is searched through HNSW) and the
Slack ack path (`python -m bench.slack_ack`: its own dev server, PostgreSQL and surfaces
process). No timing is asserted; the figures belong to the benches, not to tests."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from activities.store.memory_search import EXACT_SEARCH_MAX_ROWS
from bench import memory_recall


async def test_memory_recall_bench_searches_both_scopes_and_keeps_k_rows() -> None:
    rows = 3 * EXACT_SEARCH_MAX_ROWS  # the large scope (40%) is past the exact search's bound
    args = argparse.Namespace(rows=rows, queries=5, k=5, live_inserts=5, seed=7)
    report: dict[str, Any] = dict(await memory_recall.run(args))

    assert report["rows"] == rows and report["remember_rows"] == args.live_inserts
    assert report["bulk_rows_per_s"] > 0 and report["remember_rows_per_s_with_index"] > 0
    big, small = report["recall_large_scope"], report["recall_1pct_scope"]
    assert big["strategies"] == {"hnsw": args.queries}
    assert small["strategies"] == {"exact": args.queries}
    for scope in (big, small):
        assert scope["queries"] == args.queries and scope["min_rows_returned"] == args.k
    assert 0 < big["recall_at_k_vs_exact"] <= 1


def test_slack_ack_bench_acks_and_starts_every_event(tmp_path: Path) -> None:
    out = tmp_path / "slack_ack.json"
    rate, warmup = 20, 5
    done = subprocess.run(
        [sys.executable, "-m", "bench.slack_ack", "--rate", str(rate), "--seconds", "1"]
        + ["--warmup", str(warmup), "--concurrency", "8", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads(out.read_text())
    assert saved["requests"] == rate and saved["statuses"] == {"200": rate}  # every mention acked
    dispatch = saved["dispatch"]
    assert dispatch["recorded"] == rate + warmup and dispatch["outcomes"] == {"started": rate + warmup}
    assert dispatch["unstarted_after_drain"] == 0
    assert 0 < saved["p50_ms"] <= saved["p99_ms"] <= saved["max_ms"]
    assert "ack latency" in done.stdout
