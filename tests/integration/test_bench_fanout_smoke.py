"""The fan-out bench end to end at a tiny size: a parent on the real worker delegates to 1
and 3 scripted 3-step subagents, and the JSON it writes has every figure. No timing is
asserted beyond what the simulated model latency makes certain; the figures belong to
`python -m bench fanout`."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from bench import fanout
from bench.__main__ import render
from bench.common import prepare, write_result
from config.settings import Settings
from tests.integration.github_env import github_settings, running_fake


async def test_fanout_bench_writes_every_figure(client: Client, settings: Settings, tmp_path: Path) -> None:
    with running_fake() as fake:
        stack = await prepare(github_settings(settings, fake), client, fake)
        sizes = fanout.Sizes.smoke()
        report = await fanout.run(stack, sizes)
    out = tmp_path / "results"
    write_result("fanout", {**report, "preset": "smoke", "load_avg_at_start": [0.0]}, out)
    saved = json.loads((out / "fanout.json").read_text())

    assert set(saved["wall_s"]) == {"1", "3"} and saved["wall_over_one"]["1"] == 1.0
    # A subagent makes 3 model calls after its parent's first: the parent's own 2 calls and
    # one subagent's 3, each at least the simulated latency, bound every run from below.
    assert all(figures["median"] >= 5 * 0.1 for figures in saved["wall_s"].values())
    events = saved["history_events"]
    assert events["parent"]["3"] > events["parent"]["1"]  # each delegation adds to the parent's
    assert events["parent_per_delegation"] > 0 and events["subagent_median"] > 10
    assert events["per_delegation_with_the_subagent"] > events["subagent_median"]
    assert saved["max_parallel"] == 4
    assert (
        set(saved["targets"]) == {"four_within_1.5x_one"}
        and saved["targets"]["four_within_1.5x_one"] is False
    )
    assert "9. Fan-out to subagents" in render(out)
