"""What the chaos run compares: each run's side effects, counted where they landed (the
ledger, memories, the fake GitHub's issues and pull requests, the MCP server's log, the fake
Slack's thread, child workflows, loops and emitted playbook runs), and the report of the run
with faults against the undisturbed one."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from activities.store.db import get_pool
from bench.chaos_plans import SLACK_CHANNEL, TAIL
from bench.chaos_world import REPO, ChaosWorld
from tests.fakes.github_git import pull_requests
from workflows.loop_types import LOOP_WORKFLOW_NAME
from workflows.playbook_types import PLAYBOOK_WORKFLOW_NAME

if TYPE_CHECKING:
    from bench.chaos import Played, Sizes

RUN_DEADLINE_S = 900.0


async def effects_of(
    world: ChaosWorld, handles: dict[str, WorkflowHandle[Any, Any]]
) -> dict[str, dict[str, int]]:
    """Each run's side effects, counted where they landed."""
    pool = await get_pool(world.settings.require_database_url())
    issues = [issue["title"] for issue in world.github.issues(REPO)]
    pulls = [pull["head"]["ref"] for pull in pull_requests(world.github, REPO)]
    notes_log = world.root / "mcp" / "calls.log"
    notes = notes_log.read_text().splitlines() if notes_log.exists() else []
    effects: dict[str, dict[str, int]] = {}
    for key, handle in handles.items():
        async with pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT (SELECT count(*) FROM usage_ledger WHERE task_id = %s"
                    " AND key LIKE 'model:%%') AS calls,"
                    " (SELECT count(*) FROM memories WHERE content = %s) AS memories",
                    (handle.id, f"chaos fact {key}"),
                )
            ).fetchone()
        found = {"model_calls": int(row["calls"]), "memories": int(row["memories"])}  # type: ignore[call-overload,index]
        found["issues"] = issues.count(f"chaos {key}")
        found["notes"] = notes.count(f"chaos-{key}")
        found["pull_requests"] = pulls.count(f"openloop/{handle.id}")
        found["subagents"] = await count(world.client, f"WorkflowId STARTS_WITH '{handle.id}-d'")
        found["playbook_steps"] = await count(world.client, f"WorkflowId STARTS_WITH '{handle.id}.'")
        thread = world.slack.thread(SLACK_CHANNEL, world.threads[key]) if key in world.threads else []
        found["slack_answers"] = sum(
            f"The thread of {key} is summarised." in str(m.get("text")) for m in thread
        )
        effects[key] = found
    loops = await count(
        world.client, f"WorkflowType = '{LOOP_WORKFLOW_NAME}' AND ExecutionStatus = 'Completed'"
    )
    tails = await count(
        world.client,
        f"WorkflowType = '{PLAYBOOK_WORKFLOW_NAME}' AND OpenLoopPlaybook = '{TAIL}'"
        " AND ExecutionStatus = 'Completed'",
    )
    effects["loops"] = {"completed": loops}
    effects["emitted"] = {"playbook_runs": tails}
    return effects


async def loops_ended(client: Client) -> None:
    """The repair loops the runs started run on their own: wait until none still runs."""
    running = f"WorkflowType = '{LOOP_WORKFLOW_NAME}' AND ExecutionStatus = 'Running'"
    deadline = time.monotonic() + RUN_DEADLINE_S
    while time.monotonic() < deadline:
        try:
            if await count(client, running) == 0:
                return
        except RPCError:
            pass
        await asyncio.sleep(1.0)


async def count(client: Client, query: str) -> int:
    return len({execution.id async for execution in client.list_workflows(query)})


def compare(
    keys: list[tuple[str, str]], calm: Played, rough: Played, sizes: Sizes, seed: int
) -> dict[str, Any]:
    status = {key: outcome.split(":", 1)[0] for key, outcome in rough.outcomes.items()}
    calm_status = {key: outcome.split(":", 1)[0] for key, outcome in calm.outcomes.items()}
    equal = [
        key for _, key in keys if status[key] == calm_status[key] and rough.effects[key] == calm.effects[key]
    ]
    duplicated = {
        key: {name: n for name, n in rough.effects[key].items() if n > calm.effects[key].get(name, 0)}
        for _, key in keys
    }
    duplicated = {key: extra for key, extra in duplicated.items() if extra}
    lost = [key for _, key in keys if status[key] != "SUCCESS" and calm_status[key] == "SUCCESS"]
    by_kind: dict[str, int] = {}
    for fault in rough.faults:
        by_kind[fault.kind] = by_kind.get(fault.kind, 0) + 1
    stalls = [fault.stall_s for fault in rough.faults if fault.stall_s is not None]
    delays = [rough.ended_s[key] - calm.ended_s[key] for _, key in keys]
    return {
        "sizes": asdict(sizes),
        "seed": seed,
        "runs": len(keys),
        "faults_by_kind": by_kind,
        "outcomes_equal": len(equal),
        "duplicated_side_effects": sum(sum(extra.values()) for extra in duplicated.values()),
        "duplicated": duplicated,
        "lost_runs": len(lost),
        "lost": {key: rough.outcomes[key] for key in lost},
        "differing": {
            key: [calm.outcomes[key], rough.outcomes[key], calm.effects[key], rough.effects[key]]
            for _, key in keys
            if key not in equal
        },  # fmt: skip
        "loops_completed": [calm.effects["loops"]["completed"], rough.effects["loops"]["completed"]],
        "emitted_runs": [calm.effects["emitted"]["playbook_runs"], rough.effects["emitted"]["playbook_runs"]],
        "longest_stall_s": max(stalls, default=None),
        "most_delayed_run_s": round(max(delays, default=0.0), 1),
        "faults": [asdict(fault) for fault in rough.faults],
        "seconds": {"undisturbed": round(calm.seconds, 1), "with_faults": round(rough.seconds, 1)},
        "ended_s": {"undisturbed": calm.ended_s, "with_faults": rough.ended_s},
        "worker_restarts": rough.worker_restarts,
    }
