"""The MCP bench end to end at a tiny size: real MCP test servers over streamable HTTP, the
real MCP activities and the native tool against the fake GitHub, and the JSON it writes. No
timing is asserted; the figures belong to `python -m bench mcp`, not to tests."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from bench import mcp
from bench.__main__ import render
from bench.common import prepare, write_result
from config.settings import Settings
from tests.integration.github_env import github_settings, running_fake


async def test_mcp_bench_writes_every_figure(client: Client, settings: Settings, tmp_path: Path) -> None:
    with running_fake() as fake:
        stack = await prepare(github_settings(settings, fake), client, fake)
        sizes = mcp.Sizes.smoke()
        report = await mcp.run(stack, sizes)
    out = tmp_path / "results"
    write_result("mcp", {**report, "preset": "smoke", "load_avg_at_start": [0.0]}, out)
    saved = json.loads((out / "mcp.json").read_text())

    assert set(saved["call_ms"]) == set(mcp.CALL_VARIANTS)
    assert all(figures["n"] == sizes.call_rounds for figures in saved["call_ms"].values())
    assert set(saved["mcp_parts_ms"]) == set(mcp.PARTS)
    assert [r.split()[-1] for r in saved["http_requests_per_gateway_call"]][-1] == "tools/call"
    assert set(saved["listing_ms"]) == set(mcp.LISTING_VARIANTS)
    assert all(set(by_count) == {"1", "2"} for by_count in saved["listing_ms"].values())
    assert saved["listing_ratio_p50"]["servers"] == "2 / 1"
    assert set(saved["targets"]) == {
        "mcp_read_step_p50_within_1.2x_native",
        "listing_most_servers_p50_within_2x_one",
    }
    assert "7. MCP tools" in render(out)
