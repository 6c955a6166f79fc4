"""Throughput: `python -m bench throughput [--quick]`.

Tasks of 5 steps (4 memory.search calls, then the answer; scripted model, real activities)
with 1 and with 2 worker processes (`python -m bench worker`, the real worker with default
settings), N tasks started at once for N in the sweep. Throughput is N over the span from
the first task's start to the last one's close (server timestamps from visibility); task
latency is each task's close minus its start. The machine's CPU use over the span says
whether the cores, not the design, are the limit.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    WORKER_WARNINGS,
    Stack,
    cpu_seconds,
    log,
    new_queue,
    spawn_worker,
    start_agent_task,
    stats,
)
from bench.scripted import Plan
from workers.embedded import stop_process
from workflows.types import TaskStatus

START_CONCURRENCY = 50  # workflow starts in flight from the client at once
VISIBILITY_TRIES = 20


@dataclass
class Sizes:
    concurrency: list[int] = field(default_factory=lambda: [10, 100, 1000])
    workers: list[int] = field(default_factory=lambda: [1, 2])
    steps: int = 5
    warmup: int = 10  # tasks run on fresh workers before measuring

    @classmethod
    def quick(cls) -> Sizes:
        return cls(concurrency=[10, 50, 200])

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(concurrency=[2, 4], workers=[1], steps=3, warmup=1)


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


async def run_level(stack: Stack, queue: str, count: int, steps: int, workers: list[int]) -> dict[str, Any]:
    """Start `count` tasks at once and wait for all; figures from the server's timestamps."""
    tag = uuid.uuid4().hex[:8]
    plan = Plan(steps=steps, tool="memory.search")
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def start(i: int) -> Any:
        async with gate:
            return await start_agent_task(stack, queue, plan, f"tp-{tag}-{i}")

    busy0, total0 = cpu_times()
    cpu0 = cpu_seconds(stack, workers)
    began = time.perf_counter()
    handles = await asyncio.gather(*(start(i) for i in range(count)))
    statuses: dict[str, int] = {}
    for handle in handles:  # one at a time: detection order does not change completion times
        result = await handle.result()
        statuses[result.status.value] = statuses.get(result.status.value, 0) + 1
    wall = time.perf_counter() - began
    busy1, total1 = cpu_times()
    cpu1 = cpu_seconds(stack, workers)
    ids = {h.id for h in handles}
    for _ in range(VISIBILITY_TRIES):  # visibility trails the close by a moment
        spans = [
            (w.start_time, w.close_time)
            async for w in stack.client.list_workflows(f"TaskQueue = '{queue}'")
            if w.id in ids and w.close_time is not None
        ]
        if len(spans) == count:
            break
        await asyncio.sleep(0.5)
    first = min(s for s, _ in spans)
    last = max(c for _, c in spans)
    span = (last - first).total_seconds()
    return {
        "tasks": count,
        "statuses": statuses,
        "tasks_per_s": round(count / span, 2),
        "steps_per_s": round(count * steps / span, 1),
        "span_s": round(span, 2),
        "client_wall_s": round(wall, 2),
        "task_latency_s": stats([(c - s).total_seconds() for s, c in spans]),
        "machine_cpu_busy": round((busy1 - busy0) / max(1, total1 - total0), 3),
        "cpu_ms_per_step": {k: round((cpu1[k] - cpu0[k]) * 1000 / (count * steps), 1) for k in cpu1},
        "all_succeeded": statuses.get(TaskStatus.SUCCESS.value, 0) == count,
    }


async def run(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    by_workers: dict[str, list[dict[str, Any]]] = {}
    for workers in sizes.workers:
        queue = new_queue(f"tp{workers}")
        processes = [spawn_worker(stack.settings, queue) for _ in range(workers)]
        try:
            pids = [p.pid for p in processes]
            await run_level(stack, queue, sizes.warmup, sizes.steps, pids)
            by_workers[str(workers)] = []
            for count in sizes.concurrency:
                log(f"throughput: {count} tasks at once, {workers} worker process(es)")
                warned = sum(WORKER_WARNINGS.get(pid, 0) for pid in pids)
                level = await run_level(stack, queue, count, sizes.steps, pids)
                level["worker_log_warnings"] = sum(WORKER_WARNINGS.get(pid, 0) for pid in pids) - warned
                by_workers[str(workers)].append(level)
        finally:
            for process in processes:
                stop_process(process)
    growth = {
        workers: {
            f"{levels[0]['tasks']}->{level['tasks']}": round(
                level["tasks_per_s"] / levels[0]["tasks_per_s"], 2
            )
            for level in levels[1:]
        }
        for workers, levels in by_workers.items()
    }
    return {
        "bench": "throughput",
        "sizes": asdict(sizes),
        "task": f"{sizes.steps} model calls, {sizes.steps - 1} memory.search local tool calls",
        "by_workers": by_workers,
        "growth_vs_smallest": growth,
    }
