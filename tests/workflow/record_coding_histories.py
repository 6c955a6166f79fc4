"""Record coding histories into tests/workflow/histories/ (the replay gate).

Run by hand after a deliberate, replay-safe change to the coding task or the agent fixer,
then commit the JSON:

    python -m tests.workflow.record_coding_histories

The real stack, with the offline model (deterministic, no key): the embedded Postgres, the
Temporal dev server, a loop worker with its sandbox, the demo project served over git's
smart HTTP and the fake GitHub. The scenarios: a coding task that fixes the demo's failing
test and opens a draft pull request after approval, and a repair loop whose fixer is that
agent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.client import Client

from tests.helpers import approve_when_pending
from tests.integration.coding_env import coding_world
from tests.integration.loop_env import PYTEST, loop_world, project_with
from tests.workflow.record_loop_histories import HISTORIES, real_stack
from workers.history import fetch_history, write_history
from workflows.loop_types import Step

OFFLINE = {"model_policy": {"default": "offline/demo"}}


async def _coding_task(client: Client, pg_url: str, folder: Path) -> None:
    async with coding_world(client, pg_url, folder) as world:
        agent = await world.agent(**OFFLINE)
        handle = await world.start(agent, f"test_mean fails on main in {world.repo}; fix it")
        await approve_when_pending(handle)
        result = await handle.result()
        history = await fetch_history(client, handle.id)
        write_history(history, HISTORIES / "coding_pull_request.json")
        print(f"recorded coding_pull_request: {result.status}, {len(history.events)} events")


async def _agent_fixer(client: Client, pg_url: str, folder: Path) -> None:
    async with coding_world(client, pg_url, folder / "agent") as coding:
        agent = await coding.agent(**OFFLINE)
    async with loop_world(client, pg_url, folder, project_with(folder)) as world:
        spec = world.spec({Step.FIX: f"agent {agent.name}", Step.VERIFY: PYTEST}, fixer_agent=agent.name)
        loop_id, result = await world.run(spec)
        history = await fetch_history(client, loop_id)
        write_history(history, HISTORIES / "loop_agent_fixer.json")
        print(f"recorded loop_agent_fixer: {result.status}, {len(history.events)} events")


async def record() -> None:
    async with real_stack() as (client, pg_url, root):
        for name, scenario in {"coding": _coding_task, "fixer": _agent_fixer}.items():
            folder = root / name
            folder.mkdir()
            await scenario(client, pg_url, folder)


if __name__ == "__main__":
    asyncio.run(record())
