"""The orchestration bench end to end at a tiny size: the real workflow with the scripted
model on the dev server, the floor, the in-process loop, and the JSON it writes. No timing
is asserted; the figures belong to `python -m bench`, not to tests."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from bench import orchestration
from bench.common import prepare, write_result
from config.settings import Settings
from tests.integration.github_env import github_settings, running_fake


async def test_orchestration_bench_writes_every_figure(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    with running_fake() as fake:
        stack = await prepare(github_settings(settings, fake), client, fake)
        sizes = orchestration.Sizes.smoke()
        report = await orchestration.run(stack, sizes)
    path = write_result("orchestration", report, tmp_path)
    saved = json.loads(path.read_text())

    assert set(saved["step_ms"]) == set(orchestration.VARIANTS)
    for figures in saved["step_ms"].values():
        assert figures["n"] == sizes.steps - 1  # gaps between the steps of one task
        assert {"p50", "p95", "mean", "max"} <= set(figures)
    assert set(saved["ratios"]) == {"p50", "p95"}
    assert set(saved["slow_model"]) == {"model_ms", "agent_local_tool", "agent_remote_tool"}
    assert set(saved["targets"]) == {
        "local_tool_step_p50_within_1.3x_floor",
        "remote_tool_step_p50_within_1.3x_two_floors",
        "overhead_share_at_1s_under_5pct",
    }
    assert {"model_activity_body_ms", "tool_itself_ms", "agent_local_tool_step_parts_p50_ms"} <= set(saved)
    assert saved["machine"]["cpus"] and saved["measured_at"]
