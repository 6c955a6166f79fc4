"""The playbook compile bench at a tiny size: each size compiles in its own process, the chain
compiles whole, and the JSON holds what the report draws. No timing is asserted; the figures
belong to `python -m bench.playbook_compile`, not to tests."""

from __future__ import annotations

from bench import playbook_compile


def test_the_playbook_compile_bench_measures_each_size_and_the_ratio() -> None:
    sizes = playbook_compile.Sizes(steps=(5, playbook_compile.TARGET_STEPS // 100), repeats=1)
    report = playbook_compile.run(sizes)

    assert list(report["runs"]) == ["5", "100"]
    for figures in report["runs"].values():
        assert figures["seconds_all"] == [figures["seconds"]] and figures["seconds"] > 0
        assert 0 <= figures["cpu_seconds"]
        assert 0 < figures["added_mb"] <= figures["peak_mb"]
    assert report["time_ratio"]["steps"] == "100/5" and report["time_ratio"]["size_ratio"] == 20.0
    assert report["targets"] == {}  # no 10,000-step run, so no verdict
    rows, detail = playbook_compile.render(report)
    assert rows == [] and "| 100 " in detail and "time(100/5)" in detail


def test_the_targets_are_judged_at_ten_thousand_steps() -> None:
    run = {"seconds": 1.5, "seconds_all": [1.5], "cpu_seconds": 1.4, "peak_mb": 120.0, "added_mb": 80.0}
    report = {
        "runs": {"1000": {**run, "seconds": 0.15}, "10000": run},
        "time_ratio": {"steps": "10000/1000", "size_ratio": 10.0, "time_ratio": 10.0},
        "targets": {"10000_steps_under_2s": True, "10000_steps_under_300MB": True},
    }
    [row], _ = playbook_compile.render(report)
    assert row[0] == "playbook compile, 10,000-step chain" and row[-1] == "met"
    assert row[1] == "1.5 s (1.4 s CPU), 120 MB peak; time x10.0 for x10.0 steps"
