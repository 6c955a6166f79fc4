"""The Slack stream bench end to end at tiny sizes (`python -m bench.slack_stream --quick`):
its own embedded stack, the surfaces server, the worker, the fake Slack and model API, and
the JSON it writes. No timing is asserted; the figures belong to the bench, not to tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.slack_stream import Sizes


def test_slack_stream_bench_writes_every_figure(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.slack_stream", "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads((tmp_path / "slack_stream.json").read_text())
    quick = Sizes.quick()
    signs, tokens = saved["first_sign"], saved["first_token"]
    assert signs["trickle_ms"]["n"] == quick.trickle
    mentions = int(quick.rate * quick.seconds)
    assert signs["under_load_shown"] == f"{mentions}/{mentions}"  # every mention showed work
    assert {"p50", "p95", "mean", "max"} <= set(signs["under_load_ms"])
    assert tokens["overhead_ms"]["n"] == quick.streamed  # every answer streamed
    assert tokens["overhead_ms"]["p50"] >= 0  # Slack saw the text after the model wrote it
    assert "first streamed token" in done.stdout
