"""Orchestration overhead per agent step: `python -m bench orchestration [--quick]`.

One step is a model call and its tool call. Measured in the same run, interleaved round by
round so load drift hits every variant alike, one task at a time:

- floor_remote / floor_local: a bare workflow doing one no-op remote (local) activity per
  step, on the same server with a worker built from the same config;
- agent_local_tool / agent_remote_tool: the real AgentTaskWorkflow with the scripted model
  (real transcript and usage writes) and the real run_tool: memory.search (a local
  activity, real Postgres) or github.get_issue (a remote activity, real PyGithub against
  the fake GitHub);
- in_process_*: the same loop, policy checks and activity code with no Temporal.

Step time is the gap between the starts of consecutive model calls (or no-ops) of a task.
Then the same agent steps with 1 s of simulated model latency: the share of a step that is
not the model.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from activities.llm.model_activities import call_model
from activities.store import store_activities
from activities.tools.catalog import NATIVE_TOOLS
from activities.tools.tool_activities import run_tool
from bench.common import (
    APPROVER,
    Stack,
    bench_workers,
    deltas_ms,
    floor_queue,
    new_queue,
    running,
    start_agent_task,
    stats,
)
from bench.scripted import MODEL_BODY_MS, STEP_STARTS, FloorInput, FloorWorkflow, Plan, scripted_model
from config.agent import AgentConfig
from workflows import budget, policy
from workflows.conversation import COMPACT_AT_SHARE, DEFAULT_CONTEXT_WINDOW
from workflows.policy import memory_scope
from workflows.task_constants import SaveTaskConstantsInput, TaskConstants
from workflows.tool_catalog import catalog_tool_name, model_tool_name
from workflows.types import (
    BudgetGrant,
    BudgetUsage,
    ChatMessage,
    ModelCallInput,
    RecallInput,
    SurfaceContext,
    TaskStatus,
    ToolCallInput,
    TranscriptCursor,
    TranscriptView,
)

VARIANTS = {  # name -> (kind, tool)
    "floor_remote": ("floor", "remote"),
    "floor_local": ("floor", "local"),
    "agent_local_tool": ("agent", "memory.search"),
    "agent_remote_tool": ("agent", "github.get_issue"),
    "in_process_local_tool": ("in_process", "memory.search"),
    "in_process_remote_tool": ("in_process", "github.get_issue"),
}
TARGET_RATIO = 1.3  # per remote activity a step really needs
TARGET_SLOW_SHARE = 0.05
IN_PROCESS_TOOL_MS: dict[str, list[float]] = {}  # the tool's own time, by in-process task


@dataclass
class Sizes:
    rounds: int = 10
    steps: int = 30
    slow_tasks: int = 4
    slow_steps: int = 10
    slow_model_ms: float = 1000.0
    real_model_calls: int = 20

    @classmethod
    def quick(cls) -> Sizes:
        return cls(rounds=3, steps=12, slow_tasks=1, slow_steps=4, real_model_calls=10)

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(rounds=1, steps=3, slow_tasks=1, slow_steps=2, slow_model_ms=20, real_model_calls=1)


@dataclass
class InProcessRun:
    task_id: str
    prompt_tokens: list[int] = field(default_factory=list)  # every model call, summaries too
    tool_ms: list[float] = field(default_factory=list)
    tool_chars: list[int] = field(default_factory=list)  # each tool output the model reads
    steps: int = 0


async def run_in_process(
    agent: AgentConfig,
    plan: Plan,
    task_id: str,
    *,
    keep_tool_results: int = TranscriptView().keep_tool_results,
    context_window: int | None = None,
) -> InProcessRun:
    """AgentTaskWorkflow's loop without Temporal: recall, ceilings, the model activity code,
    policy checks, run_tool, progress signatures, summaries past 60% of the window."""
    run = InProcessRun(task_id)
    context = SurfaceContext("cli", "bench", APPROVER, event_id=task_id)
    scope = memory_scope(agent, context)
    recalled = await store_activities.recall(
        RecallInput(scope, plan.request(), agent.spec.memory.recall_k, task_id)
    )
    system = agent.spec.instructions + "".join(f"\n- {item.content}" for item in recalled.items)
    pending = [ChatMessage("system", system), ChatMessage("user", plan.request())]
    usage, step, upto, summary_upto, last_prompt = BudgetUsage(), 0, 0, 0, 0
    signatures: list[str] = []
    tools = [t.name for t in agent.spec.tools if t.name in NATIVE_TOOLS]
    window = context_window or DEFAULT_CONTEXT_WINDOW
    began = time.monotonic()

    # As the workflow does: the task's constants stored once, each call leaving them out.
    models = agent.spec.model_policy.models_for("chat")
    constants = TaskConstants(
        agent.name,
        agent.workspace,
        context.channel,
        context.surface,
        models,
        agent.spec.model_policy.models_for("summarize_conversation"),
        tools,
        agent.spec.budget.on_exceeded,
        agent.spec.budget.monthly_usd,
        agent.spec.budget.per_channel_monthly_usd,
        context_window,
        context,
        scope,
    )
    await store_activities.save_task_constants(SaveTaskConstantsInput(task_id, constants))

    def model_input(purpose: str) -> ModelCallInput:
        ceilings = budget.Ceilings.for_agent(agent, usage)
        grant = BudgetGrant(
            budget.clamp_max_tokens(ceilings, usage),
            budget.usd_headroom(ceilings, usage),
            budget.token_headroom(ceilings, usage),
        )
        return ModelCallInput(
            task_id=task_id,
            step=step,
            cursor=TranscriptCursor(upto, list(pending), TranscriptView(summary_upto, keep_tool_results)),
            budget=grant,
            model=models[0],
            tool_names=None if purpose == "step" else [],
            purpose=purpose,
        )

    while True:
        ceilings = budget.Ceilings.for_agent(agent, usage)
        if budget.check_ceilings(ceilings, usage, time.monotonic() - began) is not None:
            raise RuntimeError("the bench task hit a ceiling")
        step += 1
        if last_prompt > COMPACT_AT_SHARE * window:
            summary = await scripted_model(model_input("summary"))
            pending, upto = [], summary.transcript_upto
            summary_upto = upto
            run.prompt_tokens.append(summary.usage.prompt_tokens)
            step += 1
        result = await scripted_model(model_input("step"))
        pending, upto, last_prompt = [], result.transcript_upto, result.usage.prompt_tokens
        usage.iterations += 1
        usage.prompt_tokens += result.usage.prompt_tokens
        usage.completion_tokens += result.usage.completion_tokens
        run.prompt_tokens.append(result.usage.prompt_tokens)
        if not result.tool_calls:
            run.steps = step
            return run
        for call in result.tool_calls:
            name = catalog_tool_name(call.name)
            spec = NATIVE_TOOLS[name].spec if name in NATIVE_TOOLS else None
            check = policy.check_tool_call(agent, spec, name, call.arguments)
            if not check.allowed or policy.needs_approval(agent, name):
                raise RuntimeError(f"the bench tool call was refused: {check.problem}")
            started = time.perf_counter()
            out = await run_tool(
                ToolCallInput(
                    task_id,
                    step,
                    call.id,
                    name,
                    check.arguments,
                    f"{task_id}:{step}:{call.id}",
                    context,
                    scope,
                    context.user,
                )
            )
            run.tool_ms.append((time.perf_counter() - started) * 1000)
            run.tool_chars.append(len(out.output))
            pending.append(
                ChatMessage("tool", out.output, call.id, model_tool_name(name), content_ref=out.output_ref)
            )
            signatures.append(policy.progress_signature(name, check.arguments, out.output))
        if policy.repeats_at_end(signatures) >= agent.spec.limits.no_progress_repeats:
            raise RuntimeError("the bench task made no progress")


async def run_variant(stack: Stack, queue: str, variant: str, steps: int, model_ms: float = 0.0) -> str:
    """One task of `variant`; returns its id (the key of its step starts)."""
    kind, tool = VARIANTS[variant]
    key = f"orch-{variant}-{uuid.uuid4().hex[:10]}"
    if kind == "floor":
        handle = await stack.client.start_workflow(
            FloorWorkflow.run, FloorInput(steps, local=tool == "local"), id=key, task_queue=floor_queue(queue)
        )
        await handle.result()
        return key
    plan = Plan(steps=steps, tool=tool, model_ms=model_ms)
    if kind == "in_process":
        IN_PROCESS_TOOL_MS[key] = (await run_in_process(stack.agents["bench"].config, plan, key)).tool_ms
        return key
    agent_handle = await start_agent_task(stack, queue, plan, key)
    result = await agent_handle.result()
    if result.status != TaskStatus.SUCCESS or result.steps != steps:
        raise RuntimeError(f"bench task {agent_handle.id} ended {result.status}: {result.reason}")
    return agent_handle.id


async def real_vs_scripted_body(stack: Stack, calls: int) -> dict[str, Any]:
    """The real model activity (offline/demo) and the scripted one on the same first call: the
    stand-in's own time must match, or the agent figures would flatter or wrong the runtime."""
    agent = stack.agents["bench"].config
    times: dict[str, list[float]] = {"real_offline_demo": [], "scripted": []}
    for i in range(calls):
        for name, fn in (("real_offline_demo", call_model), ("scripted", scripted_model)):
            messages = [
                ChatMessage("system", agent.spec.instructions),
                ChatMessage("user", Plan(steps=1).request()),
            ]
            task_id = f"orch-body-{name}-{i}-{uuid.uuid4().hex[:6]}"
            demo = ["offline/demo"]
            row = TaskConstants(agent.name, agent.workspace, "bench", "cli", demo, demo, [])
            await store_activities.save_task_constants(SaveTaskConstantsInput(task_id, row))
            inp = ModelCallInput(
                task_id=task_id,
                step=1,
                cursor=TranscriptCursor(0, messages),
                budget=BudgetGrant(512, 1.0, 100_000),
                model=demo[0],
            )
            started = time.perf_counter()
            await fn(inp)
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: stats(values) for name, values in times.items()}


def _collect(keys: list[str]) -> tuple[list[float], list[float]]:
    steps = [d for key in keys for d in deltas_ms(STEP_STARTS[key])]
    bodies = [b for key in keys for b in MODEL_BODY_MS.get(key, [])]
    return steps, bodies


async def run(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    queue = new_queue("orch")
    keys: dict[str, list[str]] = {v: [] for v in VARIANTS}
    slow: dict[str, list[str]] = {"agent_local_tool": [], "agent_remote_tool": []}
    async with running(bench_workers(stack.client, stack.settings, queue)):
        for variant in VARIANTS:  # warm up: imports, pools, sticky caches, clients
            await run_variant(stack, queue, variant, 3)
        for _ in range(sizes.rounds):
            for variant in VARIANTS:
                keys[variant].append(await run_variant(stack, queue, variant, sizes.steps))
        for _ in range(sizes.slow_tasks):
            for variant in slow:
                slow[variant].append(
                    await run_variant(stack, queue, variant, sizes.slow_steps, sizes.slow_model_ms)
                )
        bodies = await real_vs_scripted_body(stack, sizes.real_model_calls)
    step_ms, body_ms = {}, {}
    for variant, variant_keys in keys.items():
        steps, model = _collect(variant_keys)
        step_ms[variant] = stats(steps)
        if model:
            body_ms[variant] = stats(model)
    floor = step_ms["floor_remote"]
    ratios = {
        q: {
            "agent_local_tool / floor_remote": round(step_ms["agent_local_tool"][q] / floor[q], 2),
            "agent_remote_tool / (2 x floor_remote)": round(
                step_ms["agent_remote_tool"][q] / (2 * floor[q]), 2
            ),
        }
        for q in ("p50", "p95")
    }
    # What Temporal adds to a step (the step less the in-process loop's), per remote floor.
    durable_ratios = {
        "agent_local_tool": round(
            (step_ms["agent_local_tool"]["p50"] - step_ms["in_process_local_tool"]["p50"]) / floor["p50"], 2
        ),
        "agent_remote_tool": round(
            (step_ms["agent_remote_tool"]["p50"] - step_ms["in_process_remote_tool"]["p50"])
            / (2 * floor["p50"]),
            2,
        ),
    }
    tool_ms = {
        tool: stats([t for key in keys[f"in_process_{tool}"] for t in IN_PROCESS_TOOL_MS[key]])
        for tool in ("local_tool", "remote_tool")
    }
    # The local tool runs inside the model activity (folded), so the body includes it.
    parts = {
        "floor_remote_step": floor["p50"],
        "model_activity_body (with the folded tool)": body_ms["agent_local_tool"]["p50"],
    }
    parts["rest (bigger payloads, workflow code)"] = step_ms["agent_local_tool"]["p50"] - sum(parts.values())
    parts["of the body: the tool itself"] = tool_ms["local_tool"]["p50"]
    temporal_ms = {
        tool: round(step_ms[f"agent_{tool}"]["p50"] - step_ms[f"in_process_{tool}"]["p50"], 2)
        for tool in ("local_tool", "remote_tool")
    }
    slow_report: dict[str, Any] = {"model_ms": sizes.slow_model_ms}
    for variant, variant_keys in slow.items():
        steps, _ = _collect(variant_keys)
        s = stats(steps)
        # Everything but the model's time, and what durability adds: that less the time the
        # same step takes in the in-process loop (its real work: database, tool).
        work = step_ms[variant.replace("agent_", "in_process_")]["p50"]
        slow_report[variant] = {
            **s,
            "overhead_share_p50": round((s["p50"] - sizes.slow_model_ms) / s["p50"], 4),
            "durable_overhead_share_p50": round((s["p50"] - sizes.slow_model_ms - work) / s["p50"], 4),
        }
    targets = {
        "local_tool_step_p50_within_1.3x_floor": ratios["p50"]["agent_local_tool / floor_remote"]
        <= TARGET_RATIO,
        "remote_tool_step_p50_within_1.3x_two_floors": (
            ratios["p50"]["agent_remote_tool / (2 x floor_remote)"] <= TARGET_RATIO
        ),
        "overhead_share_at_1s_under_5pct": all(
            slow_report[v]["durable_overhead_share_p50"] < TARGET_SLOW_SHARE for v in slow
        ),
    }
    return {
        "bench": "orchestration",
        "sizes": asdict(sizes),
        "step_ms": step_ms,
        "model_activity_body_ms": body_ms,
        "model_body_real_vs_scripted_ms": bodies,
        "tool_itself_ms": tool_ms,
        "agent_local_tool_step_parts_p50_ms": {k: round(v, 2) for k, v in parts.items()},
        "ratios": ratios,
        "temporal_overhead_ms_p50": temporal_ms,
        "slow_model": slow_report,
        "durable_part_ratios_p50": durable_ratios,
        "targets": targets,
    }
