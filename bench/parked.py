"""Parked approvals: `python -m bench parked [--quick]`.

N tasks each ask for approval of memory.save and wait, all at the same time, on one worker
process (`python -m bench worker`) whose sticky cache holds only `max_cached` workflows, so
the parked ones are evicted and replayed when their signal comes. The worker's RSS
(/proc/PID/status VmRSS) is sampled throughout: idle, while tasks start, while all wait,
while they are approved.

Tasks arrive the way they do in production, a window at a time (at most `window` started
and not yet parked), rather than all in the same second. Then the approvals: first
`paced` of them at a steady rate (people approving), then all the rest as fast as the worker
takes them (at most `window` approved and not yet run). Latency is from sending the signal
to the tool's audit row (written by run_tool right after memory.save ran), both on this
machine's clock.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from activities.runtime import runtime
from bench.common import (
    APPROVER,
    WORKER_WARNINGS,
    Stack,
    cpu_seconds,
    log,
    new_queue,
    rss_mb,
    spawn_worker,
    start_agent_task,
    stats,
)
from bench.scripted import Plan
from bench.waits import count, wait_for, windowed
from surfaces.tasks import task_id_for
from workers.embedded import stop_process
from workflows import policy
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision

TARGET_RSS_MB = 400.0
TARGET_P95_S = 1.0
PARKED_SQL = "SELECT count(*) AS n FROM audit_log WHERE kind = 'approval_requested' AND task_id LIKE %s"
TOOLS_SQL = "SELECT count(*) AS n FROM audit_log WHERE kind = 'tool_call' AND task_id LIKE %s"
FINISHED_SQL = "SELECT count(*) AS n FROM usage_ledger WHERE key = 'model:2' AND task_id LIKE %s"


@dataclass
class Sizes:
    tasks: int = 1000
    hold_s: float = 30.0
    paced: int = 100
    paced_per_s: float = 2.0  # people approving, well under what the worker takes
    window: int = 50  # tasks started and not yet parked, at most
    approve_window: int = 10  # approvals sent and not yet run, at most, after the paced ones
    max_cached: int = 100
    # Workflow task slots: under the cache size, so a full cache still has room to replay.
    max_workflow_tasks: int = 20
    warmup: int = 5  # tasks through the whole path before measuring
    settle_s: float = 3.0  # RSS sampled this long before starting and after the last task

    @classmethod
    def quick(cls) -> Sizes:
        return cls(tasks=300, hold_s=10.0, paced=40)

    @classmethod
    def smoke(cls) -> Sizes:
        """Every phase once, with evictions (more parked than cached), in seconds."""
        return cls(
            tasks=4,
            hold_s=1.0,
            paced=2,
            paced_per_s=10.0,
            window=4,
            approve_window=2,
            max_cached=2,
            max_workflow_tasks=2,
            warmup=1,
            settle_s=1.0,
        )

    @classmethod
    def full(cls) -> Sizes:
        return cls(tasks=5000, hold_s=60.0, paced=200)


class RssSampler:
    """RSS of one process every `every` seconds, tagged with the phase of the bench."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        self.pid, self.every = pid, every
        self.phase = "idle"
        self.samples: list[tuple[float, float, str]] = []
        self.began = time.monotonic()

    async def run(self) -> None:
        while True:
            self.samples.append((round(time.monotonic() - self.began, 1), rss_mb(self.pid), self.phase))
            await asyncio.sleep(self.every)

    def phase_stats(self, phase: str) -> dict[str, float]:
        values = [mb for _, mb, p in self.samples if p == phase]
        times = [t for t, _, p in self.samples if p == phase]
        report = {"min_mb": min(values), "max_mb": max(values), "last_mb": values[-1]}
        if len(values) > 1 and times[-1] > times[0]:
            report["slope_mb_per_min"] = round((values[-1] - values[0]) / (times[-1] - times[0]) * 60, 2)
        return report


def decision_for(task_id: str, plan: Plan) -> ApprovalDecision:
    """The decision a person would send: bound to the pending request and its exact action
    (the gate's request id for step 1's first call, named by its position and arguments;
    checked against a query before use)."""
    arguments = json.loads(plan.call(1).arguments)
    key = policy.call_key(0, "memory.save", arguments)
    return ApprovalDecision(
        f"apr-{task_id[-24:]}-1-{key[-12:]}", policy.action_id("memory.save", arguments), APPROVER
    )


async def approve(
    stack: Stack, task_ids: list[str], plan: Plan, sizes: Sizes, prefix: str
) -> dict[str, float]:
    """Send every approval: `paced` at a steady rate, then the rest windowed. Returns the
    wall-clock time each was sent, by task id."""
    sent: dict[str, float] = {}

    async def one(task_id: str) -> None:
        handle = stack.client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
        sent[task_id] = time.time()
        await handle.signal(AgentTaskWorkflow.approve, decision_for(task_id, plan))

    first = stack.client.get_workflow_handle_for(AgentTaskWorkflow.run, task_ids[0])
    pending = (await first.query(AgentTaskWorkflow.status)).pending_approval
    expected = decision_for(task_ids[0], plan)
    if pending is None or (pending.request_id, pending.action_id) != (
        expected.request_id,
        expected.action_id,
    ):
        raise RuntimeError(f"the parked task waits for {pending}, not for {expected}")
    began = time.monotonic()
    for i, task_id in enumerate(task_ids[: sizes.paced]):
        await asyncio.sleep(max(0.0, began + i / sizes.paced_per_s - time.monotonic()))
        await one(task_id)
    await windowed(task_ids[sizes.paced :], sizes.approve_window, lambda: count(TOOLS_SQL, prefix + "%"), one)
    return sent


async def warm_up(stack: Stack, queue: str, plan: Plan, tag: str, count: int) -> None:
    """A few tasks through the whole path first: a fresh worker's first approvals pay for
    imports and connections, which is not what a parked task costs."""
    ids = [
        (await start_agent_task(stack, queue, plan, f"pkw-{tag}-{i}", agent="bench-approvals")).id
        for i in range(count)
    ]
    prefix = task_id_for("cli", f"pkw-{tag}-")
    await wait_for("warm-up parked", PARKED_SQL, prefix, len(ids))
    await approve(stack, ids, plan, Sizes(tasks=len(ids), paced=len(ids), paced_per_s=5.0), prefix)
    await wait_for("warm-up finished", FINISHED_SQL, prefix, len(ids))


async def tool_times(prefix: str) -> dict[str, datetime]:
    pool = await runtime().pool()
    async with pool.connection() as conn:
        cursor = conn.cursor(row_factory=dict_row)
        await cursor.execute(
            "SELECT task_id, created_at FROM audit_log WHERE kind = 'tool_call' AND task_id LIKE %s",
            (prefix + "%",),
        )
        rows = await cursor.fetchall()
    return {row["task_id"]: row["created_at"] for row in rows}


async def run(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    queue, tag = new_queue("parked"), uuid.uuid4().hex[:8]
    prefix = task_id_for("cli", f"pk-{tag}-")
    plan = Plan(steps=2, tool="memory.save")
    options = {"max_cached_workflows": sizes.max_cached}
    if sizes.max_workflow_tasks:
        options["max_concurrent_workflow_tasks"] = sizes.max_workflow_tasks
    process = spawn_worker(stack.settings, queue, **options)
    sampler = RssSampler(process.pid)
    sampler.phase = "warm_up"
    sampling = asyncio.create_task(sampler.run())
    timings: dict[str, float] = {}
    try:
        await warm_up(stack, queue, plan, tag, sizes.warmup)
        sampler.phase = "idle"
        await asyncio.sleep(sizes.settle_s)
        cpu0 = cpu_seconds(stack, [process.pid])
        sampler.phase = "starting"
        task_ids = [task_id_for("cli", f"pk-{tag}-{i}") for i in range(sizes.tasks)]

        async def start(task_id: str) -> None:
            await start_agent_task(
                stack, queue, plan, task_id.removeprefix("task-cli-"), agent="bench-approvals"
            )

        began = time.monotonic()
        await windowed(task_ids, sizes.window, lambda: count(PARKED_SQL, prefix + "%"), start)
        timings["start_calls_s"] = time.monotonic() - began
        log(f"parked: {sizes.tasks} tasks started; waiting for all to ask for approval")
        await wait_for("parked", PARKED_SQL, prefix, sizes.tasks)
        timings["all_parked_after_s"] = time.monotonic() - began
        cpu1 = cpu_seconds(stack, [process.pid])
        sampler.phase = "parked"
        log(f"parked: all {sizes.tasks} waiting after {timings['all_parked_after_s']:.0f}s; holding")
        await asyncio.sleep(sizes.hold_s)
        sampler.phase = "approving"
        began = time.monotonic()
        sent = await approve(stack, task_ids, plan, sizes, prefix)
        await wait_for("tools", TOOLS_SQL, prefix, sizes.tasks)
        timings["all_tools_ran_after_s"] = time.monotonic() - began
        await wait_for("finished", FINISHED_SQL, prefix, sizes.tasks)
        timings["all_answered_after_s"] = time.monotonic() - began
        cpu2 = cpu_seconds(stack, [process.pid])
        sampler.phase = "done"
        await asyncio.sleep(sizes.settle_s)
    finally:
        sampling.cancel()
        stop_process(process)
    ran = await tool_times(prefix)
    latency = {t: ran[t].timestamp() - sent[t] for t in task_ids}
    paced = [latency[t] for t in task_ids[: sizes.paced]]
    rest = [latency[t] for t in task_ids[sizes.paced :]]
    rest_span = max(ran[t].timestamp() for t in task_ids[sizes.paced :]) - min(
        sent[t] for t in task_ids[sizes.paced :]
    )
    rss = {
        phase: sampler.phase_stats(phase)
        for phase in ("warm_up", "idle", "starting", "parked", "approving", "done")
    }
    return {
        "bench": "parked",
        "sizes": asdict(sizes),
        "rss_mb": rss,
        "rss_timeline": sampler.samples[:: max(1, len(sampler.samples) // 300)],
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
        "cpu_ms_per_task": {
            "park": {k: round((cpu1[k] - cpu0[k]) * 1000 / sizes.tasks, 1) for k in cpu0},
            "approve_and_finish": {k: round((cpu2[k] - cpu1[k]) * 1000 / sizes.tasks, 1) for k in cpu0},
        },
        "worker_log_warnings": WORKER_WARNINGS.get(process.pid, 0),
        "signal_to_tool_s": {"paced": stats(paced, 3), "all_the_rest": stats(rest, 3)},
        "all_the_rest_per_s": round(len(rest) / max(1e-9, rest_span), 2),
        "targets": {
            "rss_while_parked_under_400mb": rss["parked"]["max_mb"] < TARGET_RSS_MB,
            "paced_signal_to_tool_p95_under_1s": stats(paced, 3)["p95"] < TARGET_P95_S,
        },
    }
