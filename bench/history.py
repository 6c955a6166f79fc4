"""History cost: `python -m bench history [--quick]`.

Events and bytes (serialized protobuf, what Temporal's history limits count) of whole task
histories at several step counts, for the agent (local and remote tool) and the bare floor
(one no-op remote or local activity per step). The cost of a step is the slope between the
smallest and largest task; the slope between each pair of sizes shows it stays constant.

Then a long task with the default `max_steps_per_run`, followed run by run across
continue-as-new, and one with no cap at all, which continues as new only when Temporal
suggests it (its default thresholds), so both show where a run ends and that the task
completes.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from activities.tools.catalog import specs_for
from bench.common import (
    APPROVER,
    Stack,
    bench_workers,
    floor_queue,
    log,
    new_queue,
    running,
    start_agent_task,
    stats,
)
from bench.scripted import MODEL_BODY_MS, FloorInput, FloorWorkflow, Plan
from surfaces.tasks import task_id_for, task_search_attributes
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ActivityName, SurfaceContext, TaskInput, TaskStatus

KINDS = {  # name -> (kind, tool)
    "agent_local_tool": ("agent", "memory.search"),
    "agent_remote_tool": ("agent", "github.get_issue"),
    "floor_remote": ("floor", "remote"),
    "floor_local": ("floor", "local"),
}
TARGET_RATIO = 2.0
HISTORY_EVENT_LIMIT, HISTORY_BYTES_LIMIT = 51_200, 50 * 1024 * 1024  # Temporal's hard limits


@dataclass
class Sizes:
    steps: list[int] = field(default_factory=lambda: [10, 50, 100])
    long_steps: int = 500
    uncapped_steps: int = 700  # 0: skip the run that waits for Temporal's suggestion
    long_steps_per_run: int | None = None  # None: the task's default max_steps_per_run

    @classmethod
    def quick(cls) -> Sizes:
        return cls(steps=[5, 20, 40], long_steps=300, uncapped_steps=0)

    @classmethod
    def smoke(cls) -> Sizes:
        """Three sizes, and a long task that continues as new twice (a cap of 5 a run)."""
        return cls(steps=[2, 3, 4], long_steps=12, uncapped_steps=0, long_steps_per_run=5)


def size(history: WorkflowHistory) -> tuple[int, int, Counter[str]]:
    by_type: Counter[str] = Counter()
    for event in history.events:
        by_type[EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")] += event.ByteSize()
    return len(history.events), sum(by_type.values()), by_type


async def one(stack: Stack, queue: str, kind: str, steps: int) -> WorkflowHistory:
    what, tool = KINDS[kind]
    if what == "floor":
        handle = await stack.client.start_workflow(
            FloorWorkflow.run,
            FloorInput(steps, local=tool == "local"),
            id=f"hist-{kind}-{uuid.uuid4().hex[:8]}",
            task_queue=floor_queue(queue),
        )
        await handle.result()
        return await handle.fetch_history()
    agent_handle = await start_agent_task(
        stack, queue, Plan(steps=steps, tool=tool), f"hist-{uuid.uuid4().hex}"
    )
    result = await agent_handle.result()
    if result.status != TaskStatus.SUCCESS:
        raise RuntimeError(f"{agent_handle.id} ended {result.status}: {result.reason}")
    return await agent_handle.fetch_history()


async def runs_of(stack: Stack, workflow_id: str, run_id: str | None) -> list[dict[str, Any]]:
    """Every run of a task, following continue-as-new from `run_id`."""
    runs = []
    while run_id:
        history = await stack.client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events, nbytes, _ = size(history)
        models = sum(
            1
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == ActivityName.CALL_MODEL
        )
        last = history.events[-1]
        run_id = None
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        runs.append(
            {
                "model_calls": models,
                "events": events,
                "bytes": nbytes,
                "ended": "continued_as_new"
                if run_id
                else EventType.Name(last.event_type).removeprefix("EVENT_TYPE_"),
            }
        )
    return runs


async def long_task(stack: Stack, queue: str, steps: int, max_steps_per_run: int | None) -> dict[str, Any]:
    plan = Plan(steps=steps, tool="memory.search")
    agent = stack.agents["bench"]
    event_id = f"hist-long-{uuid.uuid4().hex}"
    context = SurfaceContext(surface="cli", channel="bench", user=APPROVER, event_id=event_id)
    task_input = TaskInput(
        task_id_for("cli", event_id),
        agent.config,
        agent.version,
        context,
        plan.request(),
        tools=specs_for(agent.config),
    )
    if max_steps_per_run is not None:
        task_input.max_steps_per_run = max_steps_per_run
    handle = await stack.client.start_workflow(
        AgentTaskWorkflow.run,
        task_input,
        id=task_input.task_id,
        task_queue=queue,
        search_attributes=task_search_attributes(agent, context),
    )
    result = await handle.result()
    runs = await runs_of(stack, handle.id, handle.first_execution_run_id)
    return {
        "steps": steps,
        "max_steps_per_run": task_input.max_steps_per_run,
        "status": result.status.value,
        "steps_done": result.steps,
        "runs": runs,
        "max_run_events": max(r["events"] for r in runs),
        "max_run_bytes": max(r["bytes"] for r in runs),
        # The model activity reads the whole transcript each call: its own time grows with the task.
        "model_activity_ms_first_10": stats(MODEL_BODY_MS[handle.id][:10]),
        "model_activity_ms_last_10": stats(MODEL_BODY_MS[handle.id][-10:]),
    }


async def run(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    queue = new_queue("hist")
    totals: dict[str, dict[int, tuple[int, int, Counter[str]]]] = {k: {} for k in KINDS}
    async with running(bench_workers(stack.client, stack.settings, queue)):
        for steps in sizes.steps:
            for kind in KINDS:
                totals[kind][steps] = size(await one(stack, queue, kind, steps))
        log(f"history: long task of {sizes.long_steps} steps")
        long = await long_task(stack, queue, sizes.long_steps, sizes.long_steps_per_run)
        uncapped = None
        if sizes.uncapped_steps:
            log(f"history: {sizes.uncapped_steps} steps with no cap per run")
            uncapped = await long_task(stack, queue, sizes.uncapped_steps, 10**6)
    lo, hi = min(sizes.steps), max(sizes.steps)
    per_step: dict[str, Any] = {}
    for kind, by_steps in totals.items():
        (e_lo, b_lo, t_lo), (e_hi, b_hi, t_hi) = by_steps[lo], by_steps[hi]
        ordered = sorted(by_steps)
        per_step[kind] = {
            "events": round((e_hi - e_lo) / (hi - lo), 2),
            "bytes": round((b_hi - b_lo) / (hi - lo), 1),
            "bytes_slope_between_sizes": [
                round((by_steps[b][1] - by_steps[a][1]) / (b - a), 1)
                for a, b in zip(ordered, ordered[1:], strict=False)
            ],
            "bytes_by_event_type": {
                k: round((t_hi[k] - t_lo[k]) / (hi - lo), 1) for k in t_hi if t_hi[k] != t_lo[k]
            },
        }
    floor = per_step["floor_remote"]
    # A remote tool needs two remote activities a step (model, tool): compared with two floor steps.
    needs = {"agent_local_tool": 1, "agent_remote_tool": 2}
    ratios = {
        kind: {
            "floor_steps": n,
            "events": round(per_step[kind]["events"] / (n * floor["events"]), 2),
            "bytes": round(per_step[kind]["bytes"] / (n * floor["bytes"]), 2),
        }
        for kind, n in needs.items()
    }
    slopes = per_step["agent_local_tool"]["bytes_slope_between_sizes"]
    return {
        "bench": "history",
        "sizes": asdict(sizes),
        "totals": {
            k: {str(s): {"events": v[0], "bytes": v[1]} for s, v in by.items()} for k, by in totals.items()
        },
        "per_step": per_step,
        "per_step_vs_floor_remote": ratios,
        "long_task": long,
        "uncapped_task": uncapped,
        "limits": {"events": HISTORY_EVENT_LIMIT, "bytes": HISTORY_BYTES_LIMIT},
        "targets": {
            "agent_step_bytes_within_2x_floor": all(r["bytes"] <= TARGET_RATIO for r in ratios.values()),
            "agent_step_events_within_2x_floor": all(r["events"] <= TARGET_RATIO for r in ratios.values()),
            "linear_history (slopes within 10%)": max(slopes) <= 1.1 * min(slopes),
            "long_task_completed_within_limits": long["status"] == TaskStatus.SUCCESS.value
            and long["max_run_events"] < HISTORY_EVENT_LIMIT
            and long["max_run_bytes"] < HISTORY_BYTES_LIMIT,
        },
    }
