"""The repair-loop bench end to end at a tiny size: the real loop workflow and loop worker with
bubblewrap against the shell baselines, a repository re-acquired over git's smart HTTP with a
stored diff, a loop whose workspace is lost, and the JSON it writes. No timing is asserted
beyond what sleeping commands make certain; the figures belong to `python -m bench loops`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from bench import loops
from bench.__main__ import render
from bench.common import prepare, write_result
from config.settings import Settings
from tests.integration.github_env import github_settings, running_fake

LOOP_PARTS = {
    "start",
    "acquire_workspace",
    "run_command",
    "save_diff",
    "record_round",
    "finish",
    "queued",
    "commands",
    "workflow_tasks_and_client",
}


async def test_loops_bench_writes_every_figure(client: Client, settings: Settings, tmp_path: Path) -> None:
    with running_fake() as fake:
        stack = await prepare(github_settings(settings, fake), client, fake)
        sizes = loops.Sizes.smoke()
        report = await loops.run(stack, sizes)
    out = tmp_path / "results"
    write_result("loops", {**report, "preset": "smoke", "load_avg_at_start": [0.0]}, out)
    saved = json.loads((out / "loops.json").read_text())
    overhead, reacquire = saved["overhead"], saved["reacquire"]

    slept = 2 * sizes.rounds * sizes.command_s  # every variant runs the same sleeping commands
    assert set(overhead["wall_s"]) == set(loops.LOOP_VARIANTS)
    for figures in overhead["wall_s"].values():
        assert len(figures["runs"]) == sizes.repeats and figures["min"] >= slept
    assert overhead["loop_over_shell"]["median"] > 1.0  # the loop does everything the shell does, and more
    spent = overhead["loop_time_s_median"]
    assert set(spent) == LOOP_PARTS
    assert spent["commands"] >= slept
    assert sum(spent.values()) == pytest.approx(overhead["wall_s"]["loop"]["median"], abs=0.02)
    assert overhead["sandbox_probe_ms"] > 0

    assert set(reacquire["seconds"]) == set(loops.ACQUIRE_VARIANTS)
    assert reacquire["repo"]["files_mb"] == 1.0 and reacquire["repo"]["pack_mb"] >= 1.0
    assert reacquire["repo"]["diff_bytes"] > 0 and reacquire["diff_apply_ms"]["median"] > 0
    assert all(rate > 0 for rate in reacquire["mb_per_s"].values())
    lost = reacquire["in_a_loop"]
    assert lost["rounds"] == 2
    assert lost["lost_noticed_to_rebuilt_s"] >= lost["reacquire_s"] >= lost["reacquire_activity_s"] > 0
    assert set(saved["targets"]) == {"loop_within_1.1x_shell"}
    assert "8. Repair loops" in render(out)
