"""The chaos run at its quick size, as CI's reliability check: the mixed workload (a run of
each kind, a playbook chain among them) on a stack of real processes, once undisturbed and
once under SIGTERM and SIGKILL to the agent and loop workers, a PostgreSQL restart and a
Temporal restart, with a seed of its own. Every run ends as it did undisturbed, with each
side effect once; the section renders from the JSON. The larger sizes and their figures are
`python -m bench chaos` (bench/RESULTS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import chaos
from bench.__main__ import render
from bench.common import write_result


@pytest.mark.timeout(900)
async def test_every_run_survives_deploys_and_crashes_with_each_side_effect_once(tmp_path: Path) -> None:
    report = await chaos.run(chaos.Sizes.quick(), seed=7)
    assert report["faults_by_kind"] == {"sigterm": 2, "sigkill": 2, "postgres": 1, "temporal": 1}
    assert report["lost_runs"] == 0, report["lost"]
    assert report["duplicated_side_effects"] == 0, report["duplicated"]
    assert report["outcomes_equal"] == report["runs"] == len(chaos.KINDS), report["differing"]
    assert report["loops_completed"] == [1, 1] and report["emitted_runs"] == [1, 1]
    out = tmp_path / "results"
    write_result("chaos", {**report, "preset": "smoke", "load_avg_at_start": [0.0]}, out)
    assert json.loads((out / "chaos.json").read_text())["runs"] == report["runs"]
    assert "10. Chaos: deploys and crashes" in render(out)
