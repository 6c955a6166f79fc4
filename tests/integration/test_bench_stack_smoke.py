"""The benches without a smoke test of their own, end to end at their smoke sizes on the
suite's servers: parked approvals and throughput (each on a `python -m bench worker` child
process), history and token efficiency. Each writes its JSON and its section renders. No
timing is asserted; the figures belong to `python -m bench`, not to tests."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from bench import history, parked, throughput, tokens, waits
from bench.__main__ import render
from bench.common import Stack, prepare, write_result
from config.settings import Settings
from tests.integration.github_env import github_settings, running_fake
from workflows.types import TaskStatus


@pytest.fixture
async def stack(client: Client, settings: Settings) -> AsyncIterator[Stack]:
    with running_fake() as fake:
        yield await prepare(github_settings(settings, fake), client, fake)


def saved(name: str, report: dict[str, Any], tmp_path: Path) -> tuple[dict[str, Any], str]:
    """The JSON as `python -m bench` writes it, and the report section drawn from it."""
    out = tmp_path / "results"
    path = write_result(name, {**report, "preset": "smoke", "load_avg_at_start": [0.0]}, out)
    return json.loads(path.read_text()), render(out)


async def test_parked_bench_parks_approves_and_finishes_every_task(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A task that never asks for approval (the bench's plan misread, a request id that moved)
    # fails the bench within two minutes here (a busy CI machine included), not five.
    monkeypatch.setattr(waits, "STALL_S", 120.0)
    sizes = parked.Sizes.smoke()
    assert sizes.tasks > sizes.max_cached  # parked tasks are evicted and replayed on approval
    report, section = saved("parked", await parked.run(stack, sizes), tmp_path)

    assert report["sizes"] == asdict(sizes)
    latency = report["signal_to_tool_s"]
    assert latency["paced"]["n"] == sizes.paced
    assert latency["all_the_rest"]["n"] == sizes.tasks - sizes.paced
    assert all(0 < figures["p50"] <= figures["max"] for figures in latency.values())
    phases = report["rss_mb"]
    assert set(phases) == {"warm_up", "idle", "starting", "parked", "approving", "done"}
    assert all(0 < phase["min_mb"] <= phase["max_mb"] for phase in phases.values())
    assert set(report["timings_s"]) == {
        "start_calls_s",
        "all_parked_after_s",
        "all_tools_ran_after_s",
        "all_answered_after_s",
    }
    assert all(cpu["workers"] > 0 for cpu in report["cpu_ms_per_task"].values())
    assert set(report["targets"]) == {"rss_while_parked_under_400mb", "paced_signal_to_tool_p95_under_1s"}
    assert "3. Parked approvals" in section


async def test_throughput_bench_runs_every_task_to_success(stack: Stack, tmp_path: Path) -> None:
    sizes = throughput.Sizes.smoke()
    report, section = saved("throughput", await throughput.run(stack, sizes), tmp_path)

    assert set(report["by_workers"]) == {str(n) for n in sizes.workers}
    for levels in report["by_workers"].values():
        assert [level["tasks"] for level in levels] == sizes.concurrency
        for level in levels:
            assert level["statuses"] == {TaskStatus.SUCCESS.value: level["tasks"]}
            assert level["all_succeeded"] and level["task_latency_s"]["n"] == level["tasks"]
            assert level["tasks_per_s"] > 0 and level["span_s"] > 0
            assert level["cpu_ms_per_step"]["workers"] > 0
    assert set(report["growth_vs_smallest"]["1"]) == {"2->4"}
    assert "2. Throughput" in section


async def test_history_bench_measures_every_kind_and_follows_continue_as_new(
    stack: Stack, tmp_path: Path
) -> None:
    sizes = history.Sizes.smoke()
    report, section = saved("history", await history.run(stack, sizes), tmp_path)

    assert set(report["totals"]) == set(history.KINDS)
    for by_steps in report["totals"].values():
        events = [by_steps[str(steps)]["events"] for steps in sizes.steps]
        assert events == sorted(events) and events[0] < events[-1]  # a step adds to the history
    assert all(step["events"] > 0 and step["bytes"] > 0 for step in report["per_step"].values())
    long = report["long_task"]
    assert long["status"] == TaskStatus.SUCCESS.value and long["steps_done"] == sizes.long_steps
    assert sizes.long_steps_per_run is not None
    runs = long["runs"]
    assert len(runs) == math.ceil(sizes.long_steps / sizes.long_steps_per_run)
    assert [r["ended"] for r in runs[:-1]] == ["continued_as_new"] * (len(runs) - 1)
    assert runs[-1]["ended"] == "WORKFLOW_EXECUTION_COMPLETED"
    assert sum(r["model_calls"] for r in runs) == sizes.long_steps
    assert report["uncapped_task"] is None
    assert "long_task_completed_within_limits" in report["targets"]
    assert "4. History cost" in section


async def test_tokens_bench_counts_every_call_of_each_session(stack: Stack, tmp_path: Path) -> None:
    sizes = tokens.Sizes.smoke()
    report, section = saved("tokens", await tokens.run(stack, sizes), tmp_path)

    sessions = report["sessions"]
    assert set(sessions) == {"none", "default", "with_summary"}
    calls = sizes.tool_calls + 1  # a tool call a step, then the answer
    assert sessions["none"]["model_calls"] == sessions["default"]["model_calls"] == calls
    assert sessions["with_summary"]["model_calls"] > calls  # the small window made it summarise
    assert all(s["prompt_tokens_total"] >= s["prompt_tokens_max_call"] > 0 for s in sessions.values())
    assert sessions["default"]["prompt_tokens_total"] <= sessions["none"]["prompt_tokens_total"]
    assert all(0 < share <= 1 for share in report["share_of_uncompacted"].values())
    assert "5. Token efficiency" in section
