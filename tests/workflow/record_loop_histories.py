"""Record repair-loop histories into tests/workflow/histories/ (the replay gate).

Run by hand after a deliberate, replay-safe change to the loop workflow, then commit the JSON:

    python -m tests.workflow.record_loop_histories

A loop runs its real commands, so this uses the real stack: the embedded Postgres, the
Temporal dev server, a loop worker with its sandbox, and the demo project served over git's
smart HTTP. The scenarios: the demo project repaired in round 2, and a silent command
killed as stalled in a loop that then runs out of rounds.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.client import Client

from activities.store.db import apply_migrations, close_pools
from tests.integration.loop_env import PYTEST, loop_world, project_with
from workers.embedded import EmbeddedPostgres, TemporalDevServer, free_port
from workers.history import fetch_history, write_history
from workflows.loop_types import Limits, Step
from workflows.payloads import data_converter

HISTORIES = Path(__file__).parent / "histories"


@asynccontextmanager
async def real_stack() -> AsyncIterator[tuple[Client, str, Path]]:
    """The embedded Postgres and a Temporal dev server in a scratch folder: client, database, folder."""
    with tempfile.TemporaryDirectory(prefix="ol-") as scratch:
        root = Path(scratch)
        postgres = EmbeddedPostgres(root / "pg")
        pg_url = postgres.start()
        apply_migrations(pg_url)
        server = TemporalDevServer(port=free_port(), ui_port=None, db_file=None, log_file=root / "t.log")
        server.start()
        server.wait_healthy()
        try:
            yield await Client.connect(server.address, data_converter=data_converter), pg_url, root
        finally:
            await close_pools()
            server.stop()
            postgres.stop()


async def record() -> None:
    async with real_stack() as (client, pg_url, root):
        scenarios = {
            "loop_repaired": {Step.FIX: "python autofix.py {last_error}", Step.VERIFY: PYTEST},
            "loop_stalled": {Step.SCAN: "sleep 20", Step.VERIFY: PYTEST},
        }
        for name, commands in scenarios.items():
            folder = root / name
            folder.mkdir()
            async with loop_world(client, pg_url, folder, project_with(folder)) as world:
                limits = Limits(stall_timeout_s=1.0, total_rounds=1) if name == "loop_stalled" else None
                spec = world.spec(commands, **({"limits": limits} if limits else {}))
                loop_id, result = await world.run(spec)
                history = await fetch_history(client, loop_id)
                write_history(history, HISTORIES / f"{name}.json")
                print(f"recorded {name}: {result.status}, {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(record())
