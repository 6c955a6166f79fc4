"""Chaos: does every run survive deploys and crashes with the same outcome and each side
effect once? `python -m bench chaos [--quick|--full] [--seed N]`.

A mixed workload (`bench.chaos_plans`: approvals, a GitHub issue, an MCP write, a delegation
tree, a repair loop, a coding task to a draft pull request) runs twice on a stack of real
processes (`bench.chaos_world`): once undisturbed, then again while a seeded driver sends
SIGTERM (a deploy) and SIGKILL (a crash) to the workers at random moments, restarts
PostgreSQL once and the Temporal dev server (on its database file) once. Every run's outcome
and side effects (memories, issues, MCP writes, subagents, loops, pull requests, ledger
rows) are compared with the undisturbed run's. Same seed, same faults at the same moments.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from activities.playbooks.starts import start_run
from activities.store.db import get_pool
from bench.chaos_outcomes import RUN_DEADLINE_S, compare, effects_of, loops_ended
from bench.chaos_plans import (
    APPROVER,
    FAN,
    KINDS,
    NEEDS_APPROVAL,
    SLACK_CHANNEL,
    chaos_playbooks,
    request,
)
from bench.chaos_world import WORKERS, ChaosWorld, chaos_world
from bench.common import log
from surfaces.tasks import start_task
from tests.fakes.slack_api import BOT_USER
from workflows.agent_task import AgentTaskWorkflow
from workflows.playbook_types import PlaybookRunResult
from workflows.types import ApprovalDecision, SurfaceContext, TaskResult


@dataclass
class Sizes:
    per_kind: int = 2  # runs of each kind
    sigterms: int = 4
    sigkills: int = 4
    postgres_restarts: int = 1
    temporal_restarts: int = 1

    @classmethod
    def quick(cls) -> Sizes:
        return cls(per_kind=1, sigterms=2, sigkills=2)

    @classmethod
    def full(cls) -> Sizes:
        return cls(per_kind=4, sigterms=8, sigkills=8)


@dataclass
class Fault:
    at_s: float
    kind: str  # sigterm | sigkill | postgres | temporal
    target: str = ""
    took_s: float = 0.0  # until the part was back
    stall_s: float | None = None  # from the fault until the workload next moved


@dataclass
class Played:
    outcomes: dict[str, str] = field(default_factory=dict)  # run key -> status: reason
    ended_s: dict[str, float] = field(default_factory=dict)  # run key -> when it ended
    effects: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0
    faults: list[Fault] = field(default_factory=list)
    worker_restarts: int = 0


def fault_plan(sizes: Sizes, rng: random.Random) -> list[Fault]:
    kinds = (
        ["sigterm"] * sizes.sigterms
        + ["sigkill"] * sizes.sigkills
        + ["postgres"] * sizes.postgres_restarts
        + ["temporal"] * sizes.temporal_restarts
    )
    rng.shuffle(kinds)
    # Fractions of the undisturbed run's wall time: each fault falls while runs are going.
    moments = sorted(rng.uniform(0.05, 0.9) for _ in kinds)
    return [
        Fault(at, kind, rng.choice(WORKERS) if kind.startswith("sig") else "")
        for at, kind in zip(moments, kinds, strict=True)
    ]


async def play(world: ChaosWorld, keys: list[tuple[str, str]], faults: list[Fault], label: str) -> Played:
    played = Played(faults=faults)
    began = time.monotonic()
    handles = {key: await _start(world, kind, key, label) for kind, key in keys}
    progress: list[float] = []
    watcher = asyncio.create_task(_watch_progress(world, progress))
    approvers = [asyncio.create_task(_approve(handles[key])) for kind, key in keys if kind in NEEDS_APPROVAL]
    driver = asyncio.create_task(_inject(world, faults, began))

    async def ended(key: str) -> str:
        outcome = await _result(handles[key])
        played.ended_s[key] = round(time.monotonic() - began, 1)
        return outcome

    results = await asyncio.wait_for(asyncio.gather(*(ended(key) for key in handles)), RUN_DEADLINE_S)
    played.seconds = time.monotonic() - began
    await driver
    for task in (watcher, *approvers):
        task.cancel()
    played.outcomes = dict(zip(handles, results, strict=True))
    await loops_ended(world.client)
    played.effects = await effects_of(world, handles)
    for fault in faults:
        after = [moment for moment in progress if moment > began + fault.at_s]
        fault.stall_s = round(after[0] - began - fault.at_s, 2) if after else None
    played.worker_restarts = world.restarts
    return played


async def _start(world: ChaosWorld, kind: str, key: str, label: str) -> WorkflowHandle[Any, Any]:
    if kind == "playbook":  # the event that starts the fan-out playbook, which emits the next
        fan = next(playbook for playbook in chaos_playbooks() if playbook.name == FAN)
        pool = await get_pool(world.settings.require_database_url())
        run_id, _ = await start_run(
            world.client, pool, world.settings.task_queue, fan, "chaos.go", {"key": key}, f"{label}-{key}"
        )
        return world.client.get_workflow_handle(run_id, result_type=PlaybookRunResult)
    context = SurfaceContext(surface="cli", channel=f"chaos-{label}", user=APPROVER)
    if kind == "slack":  # a mention in a thread of the fake Slack
        thread = world.slack.add_message(SLACK_CHANNEL, f"<@{BOT_USER}> {request(kind, key)}", user="U0CHAOS")
        context = SurfaceContext(surface="slack", channel=SLACK_CHANNEL, user="U0CHAOS", thread=thread)
        world.threads[key] = thread
    handle, _ = await start_task(
        world.client,
        world.settings,
        world.agent,
        context,
        request(kind, key),
        task_id=f"task-chaos-{label}-{key}",
    )
    return handle


async def _result(handle: WorkflowHandle[Any, Any]) -> str:
    while True:
        try:
            result: TaskResult | PlaybookRunResult = await handle.result()
            return f"{result.status.value}: {result.reason}"
        except WorkflowFailureError as failure:
            return f"FAILED: {failure.cause}"
        except RPCError:  # Temporal is restarting: ask again
            await asyncio.sleep(1.0)


async def _approve(handle: WorkflowHandle[Any, Any]) -> None:
    """Approve each request the run waits on, as a person would, whoever answers the query."""
    decided: set[str] = set()
    while True:
        try:
            status = await handle.query(AgentTaskWorkflow.status, rpc_timeout=_seconds(5))
            pending = status.pending_approval
            if pending is not None and pending.request_id not in decided:
                decision = ApprovalDecision(pending.request_id, pending.action_id, APPROVER)
                await handle.signal(AgentTaskWorkflow.approve, decision)
                decided.add(pending.request_id)
        except Exception:  # noqa: BLE001 - no worker or no server this moment: ask again
            pass
        await asyncio.sleep(0.5)


async def _watch_progress(world: ChaosWorld, progress: list[float]) -> None:
    """When the workload moved: each time the ledger or the audit log grew."""
    last = -1
    while True:
        try:
            pool = await get_pool(world.settings.require_database_url())
            async with pool.connection() as conn:
                row = await (
                    await conn.execute(
                        "SELECT (SELECT count(*) FROM usage_ledger) + (SELECT count(*) FROM audit_log)"
                    )
                ).fetchone()
            count = int(next(iter(row.values())) if isinstance(row, dict) else row[0])  # type: ignore[index]
            if count != last:
                progress.append(time.monotonic())
                last = count
        except Exception:  # noqa: BLE001 - Postgres is restarting
            pass
        await asyncio.sleep(0.25)


async def _inject(world: ChaosWorld, faults: list[Fault], began: float) -> None:
    for fault in faults:
        await asyncio.sleep(max(0.0, began + fault.at_s - time.monotonic()))
        start = time.monotonic()
        log(f"chaos: {fault.kind} {fault.target} at {fault.at_s:.1f}s")
        if fault.kind in ("sigterm", "sigkill"):
            how = signal.SIGTERM if fault.kind == "sigterm" else signal.SIGKILL
            await world.stop_worker(fault.target, how)
            await world.ready(world.spawn(fault.target))
        elif fault.kind == "postgres":
            await world.restart_postgres()
        else:
            await world.restart_temporal()
        fault.took_s = round(time.monotonic() - start, 2)


def _seconds(value: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=value)


async def run(sizes: Sizes, seed: int) -> dict[str, Any]:
    keys = [(kind, f"r{n:03d}") for n in range(sizes.per_kind) for kind in KINDS]
    keys = [(kind, f"{key}{kind[0]}") for kind, key in keys]
    faults = fault_plan(sizes, random.Random(seed))
    root = Path(tempfile.mkdtemp(prefix="ol-chaos-"))
    async with chaos_world(root / "calm", "calm") as world:
        log(f"chaos: {len(keys)} runs undisturbed")
        calm = await play(world, keys, [], "calm")
    for fault in faults:
        fault.at_s = round(fault.at_s * calm.seconds, 2)
    async with chaos_world(root / "rough", "rough") as world:
        log(f"chaos: {len(keys)} runs, {len(faults)} faults (seed {seed}); logs in {root}")
        rough = await play(world, keys, faults, "rough")
    report = compare(keys, calm, rough, sizes, seed)
    if report["outcomes_equal"] == report["runs"] and report["lost_runs"] == 0:
        shutil.rmtree(root, ignore_errors=True)  # kept to read when a run differs
    return report
