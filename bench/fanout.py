"""Fan-out: what delegating to subagents costs, `python -m bench fanout` (about 2 minutes).

A parent task on the real worker answers its first model call with `n` `agent.delegate`
calls (n = 1, 4 and 16, alternated, `repeats` times each), each a 3-step subagent (two
memory.search calls, then an answer), and sums up in its second call. Delegations from one
answer run in parallel, at most `MAX_PARALLEL` at a time, as child workflows of the parent.
The model is scripted (`fanout_model`: the real model activity's bookkeeping around a
scripted answer, as `bench.scripted`) with `model_ms` of simulated provider latency a call.

Reported: each fan-out's wall time (start to result) as a ratio against one subagent (the
target: 4 subagents within 1.5x one), and history events per delegation: the events a
delegation adds to the parent's history, and a subagent's own.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType

from activities.llm.compaction import estimate_tokens
from activities.llm.model_activities import prepare_call, record_answer
from activities.runtime import runtime
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from bench.common import Stack, bench_agent, new_queue, running
from bench.scripted import SCRIPTED_MODEL, Plan, scripted_answer, task_request
from surfaces.tasks import start_task, task_id_for
from workers.worker import ACTIVITIES, build_worker
from workflows.delegation import MAX_PARALLEL
from workflows.tool_catalog import model_tool_name
from workflows.types import (
    ActivityName,
    ModelCallInput,
    ModelCallResult,
    ModelUsage,
    SurfaceContext,
    TaskStatus,
    ToolCall,
)

AGENT = "bench-fanout"
TARGET_FOUR_OVER_ONE = 1.5
_FANOUT = re.compile(r"^bench fanout: children=(\d+) steps=(\d+) model_ms=([\d.]+)")


@dataclass
class Sizes:
    fanouts: tuple[int, ...] = (1, 4, 16)
    steps: int = 3  # model calls of each subagent
    model_ms: float = 500.0  # simulated provider latency of every model call
    repeats: int = 3

    @classmethod
    def quick(cls) -> Sizes:
        return cls(repeats=1)

    @classmethod
    def full(cls) -> Sizes:
        return cls(repeats=5)

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(fanouts=(1, 3), steps=3, model_ms=100.0, repeats=1)


def fanout_request(children: int, steps: int, model_ms: float) -> str:
    return f"bench fanout: children={children} steps={steps} model_ms={model_ms:g}"


def _answer(request: str, stored: list[dict[str, Any]], purpose: str) -> tuple[str, list[ToolCall], float]:
    """The parent delegates on its first call and sums up on its second; a subagent follows
    its `bench plan` like any bench task."""
    fan = _FANOUT.match(request)
    if fan is None:
        plan = Plan.parse(request)
        text, calls = scripted_answer(plan, stored, purpose)
        return text, calls, plan.model_ms
    children, steps, model_ms = int(fan.group(1)), int(fan.group(2)), float(fan.group(3))
    if any(m["role"] == "assistant" for m in stored) or purpose != "step":
        return f"Put together what {children} subagents found.", [], model_ms
    child = Plan(steps=steps, tool="memory.search", model_ms=model_ms)
    calls = [
        ToolCall(
            f"d{n}", model_tool_name("agent.delegate"), json.dumps({"task": f"{child.request()} part={n}"})
        )
        for n in range(children)
    ]
    return "", calls, model_ms


@activity.defn(name=ActivityName.CALL_MODEL)
async def fanout_model(inp: ModelCallInput) -> ModelCallResult:
    """The model activity's bookkeeping (retry cache, transcript, usage row) around a
    scripted answer, as `bench.scripted.scripted_model`, knowing fan-out parents too."""
    pool = await runtime().pool()
    prepared = await prepare_call(pool, inp)
    if prepared.cached is not None:
        return prepared.cached
    request = task_request(prepared.stored)
    text, calls, model_ms = _answer(request, prepared.stored, inp.purpose)
    if model_ms:
        await asyncio.sleep(model_ms / 1000)
    usage = ModelUsage(
        SCRIPTED_MODEL,
        estimate_tokens(prepared.messages),
        estimate_tokens([{"content": text, "tool_calls": [asdict(c) for c in calls]}]),
        0.0,
    )
    finish = "tool_calls" if calls else "stop"
    result = ModelCallResult(text, calls, finish, usage, prepared.answer_seq, inp.max_tokens, offline=True)
    result.tool_results = prepared.tool_results
    await record_answer(pool, inp, result, prepared.answer_seq)
    return result


@dataclass
class Run:
    children: int
    wall_s: float
    parent_events: int
    child_events: list[int]


async def run_one(stack: Stack, queue: str, children: int, sizes: Sizes) -> Run:
    """One fan-out task, start to result, and the size of its histories."""
    event_id = uuid.uuid4().hex
    context = SurfaceContext(surface="cli", channel="bench", user="cli:bench", event_id=event_id)
    settings = stack.settings.model_copy(update={"task_queue": queue})
    started = time.perf_counter()
    handle, _ = await start_task(
        stack.client,
        settings,
        stack.agents[AGENT],
        context,
        fanout_request(children, sizes.steps, sizes.model_ms),
        task_id=task_id_for("cli", event_id),
    )
    result = await handle.result()
    wall = time.perf_counter() - started
    assert result.status == TaskStatus.SUCCESS, result.reason
    events = (await handle.fetch_history()).events
    started_children = [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    assert len(started_children) == children, (children, started_children)
    child_events = [
        len((await stack.client.get_workflow_handle(child).fetch_history()).events)
        for child in started_children
    ]
    return Run(children, wall, len(events), child_events)


def fanout_agent() -> Any:
    config = bench_agent(AGENT)
    spec = config.spec
    tools = [
        *spec.tools,
        spec.tools[0].model_copy(update={"name": "agent.delegate", "permissions": ["agents:delegate"]}),
    ]
    return config.model_copy(update={"spec": spec.model_copy(update={"tools": tools})})


async def run(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    pool = await get_pool(stack.settings.require_database_url())
    stack.agents[AGENT], _ = await apply_agent(pool, fanout_agent())
    queue = new_queue("fanout")
    activities = [fanout_model if a.__name__ == "call_model" else a for a in ACTIVITIES]
    runs: dict[int, list[Run]] = {n: [] for n in sizes.fanouts}
    async with running([build_worker(stack.client, stack.settings, queue, activities=activities)]):
        await run_one(stack, queue, 1, sizes)  # warm up: imports, pools, the sticky cache
        for _ in range(sizes.repeats):
            for n in sizes.fanouts:
                runs[n].append(await run_one(stack, queue, n, sizes))
    return report(runs, sizes)


def report(runs: dict[int, list[Run]], sizes: Sizes) -> dict[str, Any]:
    one = min(runs)
    wall = {n: round(statistics.median(r.wall_s for r in rs), 3) for n, rs in runs.items()}
    parent_events = {n: round(statistics.median(r.parent_events for r in rs)) for n, rs in runs.items()}
    most = max(runs)
    # What one more delegation adds to the parent's history: the slope from the smallest
    # fan-out to the largest (their difference is only the number of children).
    per_delegation = (parent_events[most] - parent_events[one]) / (most - one) if most > one else 0.0
    child_events = [e for rs in runs.values() for r in rs for e in r.child_events]
    ratios = {n: round(wall[n] / wall[one], 2) for n in runs}
    four = ratios.get(4)
    return {
        "sizes": asdict(sizes),
        "max_parallel": MAX_PARALLEL,
        "wall_s": {str(n): {"median": wall[n], "runs": [round(r.wall_s, 3) for r in runs[n]]} for n in runs},
        "wall_over_one": {str(n): ratios[n] for n in runs},
        "history_events": {
            "parent": {str(n): parent_events[n] for n in runs},
            "parent_per_delegation": round(per_delegation, 1),
            "subagent_median": statistics.median(child_events) if child_events else 0,
            "per_delegation_with_the_subagent": round(
                per_delegation + (statistics.median(child_events) if child_events else 0), 1
            ),
        },
        "targets": {"four_within_1.5x_one": four is not None and four <= TARGET_FOUR_OVER_ONE},
    }
