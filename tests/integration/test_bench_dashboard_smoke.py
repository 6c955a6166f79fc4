"""The dashboard bench end to end at a tiny size: listed, real and waiting tasks seeded on the
dev server, usage rows and memories in Postgres, the surfaces app served by uvicorn in a child
process, every page loaded over HTTP with a signed-in session, and the JSON it writes. No
timing is asserted; the figures belong to `python -m bench dashboard`.

It runs on a Temporal dev server of its own: the bench lists thousands of stand-in tasks (the
task workflow's type, finished at once) that are not agent tasks' histories, and the shared
server's `openloop replay --all` must find only real ones."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.store.db import get_pool
from bench import dashboard
from bench.common import prepare, write_result
from config.settings import Settings
from tests.integration.github_env import github_settings, running_fake
from workers.embedded import TemporalDevServer, free_port
from workflows.payloads import data_converter


@pytest.fixture
async def own_temporal(tmp_path: Path) -> AsyncIterator[tuple[TemporalDevServer, Client]]:
    server = TemporalDevServer(
        port=free_port(), ui_port=None, db_file=None, log_file=tmp_path / "temporal.log"
    )
    server.start()
    try:
        server.wait_healthy()
        yield server, await Client.connect(server.address, data_converter=data_converter)
    finally:
        server.stop()


async def test_dashboard_bench_loads_every_page_and_writes_every_figure(
    own_temporal: tuple[TemporalDevServer, Client], settings: Settings, tmp_path: Path
) -> None:
    server, client = own_temporal
    settings = settings.model_copy(update={"temporal_address": server.address})
    sizes = dashboard.Sizes.smoke()
    with running_fake() as fake:
        stack = await prepare(github_settings(settings, fake), client, fake)
        report = await dashboard.run(stack, sizes)
    path = write_result("dashboard", {**report, "preset": "smoke", "load_avg_at_start": [0.0]}, tmp_path)
    saved = json.loads(path.read_text())

    assert set(saved["pages"]) == set(saved["targets"])
    assert len(saved["pages"]) == 15
    for name, page in saved["pages"].items():
        assert page["statuses"] == {"200": sizes.loads}, (name, page)  # signed in, every load a page
        assert page["n"] == sizes.loads and page["p50"] <= page["p95"] <= page["max"]
    later = saved["pages"]["tasks, later page"]["path"]
    assert later.startswith("/tasks?page="), later  # followed the first page's Next link
    seeding = saved["seeding"]
    assert seeding["listed_tasks"]["count"] == sizes.tasks - sizes.real_tasks - sizes.waiting - 1
    assert seeding["usage_rows"]["count"] == 2 * seeding["listed_tasks"]["count"]
    assert seeding["real_tasks"]["count"] == 3 and seeding["waiting_tasks"]["count"] == 2
    async with (await get_pool(settings.require_database_url())).connection() as conn:
        memories = await (
            await conn.execute("SELECT count(*) AS n FROM memories WHERE source_task_id LIKE 'dash-memory-%'")
        ).fetchone()
    assert memories is not None and memories["n"] >= sizes.memories
    assert "| tasks, first page" in dashboard.render(saved)
