"""The egress bench end to end at a tiny size: real bubblewrap, the real proxies handed their
ports by the bridge, the local server, every scenario and mode, and the JSON and the report
section it writes. No ratio is asserted; the figures belong to `python -m bench egress`."""

from __future__ import annotations

import json
from pathlib import Path

from bench import egress
from bench.__main__ import render
from bench.common import write_result


async def test_egress_bench_writes_every_figure(tmp_path: Path) -> None:
    sizes = egress.Sizes(requests=5, registry_requests=3, delay_ms=10, body_kb=4, repeats=1, starts=2)
    report = await egress.run(sizes)  # about 3 s: scripts/test.sh runs it every time
    out = tmp_path / "results"
    write_result("egress", {**report, "preset": "smoke", "load_avg_at_start": [0.0]}, out)
    saved = json.loads((out / "egress.json").read_text())

    assert set(saved["requests_s"]) == set(egress.SCENARIOS)
    for name, scenario in egress.SCENARIOS.items():
        modes = saved["requests_s"][name]
        assert list(modes) == list(scenario.modes)
        assert all(len(figures["runs"]) == sizes.repeats and figures["min"] > 0 for figures in modes.values())
        assert set(saved["proxied_over_direct"][name]) == set(scenario.modes) - {"direct"}
        assert set(saved["added_us_per_request"][name]) == set(scenario.modes) - {"direct"}
        assert set(saved["proxy_cpu_us_per_request"][name]) == set(scenario.modes) - {"direct"}
    # The registry-like server waits before each answer, so neither side can be faster than that.
    waited = sizes.registry_requests * sizes.delay_ms / 1000
    assert all(v["min"] >= waited for v in saved["requests_s"]["registry_like"].values())
    assert all(len(v["runs"]) == sizes.starts for v in saved["command_ms"].values())
    assert saved["session_start_ms"]["median"] > 0
    assert set(saved["targets"]) == {f"{n}_within_1.15x" for n in egress.SCENARIOS} | {"start_within_50ms"}

    text = render(out)
    assert "### 11. Egress allowlist: the sandbox's proxies" in text
    assert "registry-like requests (10 ms, 4 kB)" in text and "start cost per command" in text
    assert "us CPU)" in text  # what the proxies cost the worker, beside the time they add
