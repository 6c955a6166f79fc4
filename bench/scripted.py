"""The benches' zero-latency scripted model and the floor workflow they are measured against.

`scripted_model` is registered under the real model activity name. It runs the real model
activity's bookkeeping (`activities/llm/model_activities.py` `prepare_call` and `record_answer`: the retry
cache check, transcript appends, the prompt built from the stored transcript with the
task's view, then the answer and the usage row in one transaction) around a scripted
answer instead of a provider call, so the per-step database work is what production does.
The script is read from the task's request (`Plan`), so any worker process serves any
bench task.

`FloorWorkflow` is the reference: N steps of one no-op activity each (remote or local).
The workflow sandbox re-imports this module, so everything but `temporalio.workflow` is
imported through the pass-through.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import asyncio
    import json
    import re
    import time
    from collections import defaultdict
    from dataclasses import asdict, dataclass
    from datetime import timedelta
    from typing import Any

    from temporalio import activity

    from activities.llm.compaction import estimate_tokens
    from activities.llm.model_activities import prepare_call, record_answer
    from activities.runtime import runtime
    from activities.store.transcript import SUMMARY_ROLE
    from workflows.prompts import MEMORIES_HEADER
    from workflows.tool_catalog import model_tool_name
    from workflows.types import ActivityName, ModelCallInput, ModelCallResult, ModelUsage, ToolCall

SCRIPTED_MODEL = "bench/scripted"
BENCH_REPO = "acme/bench"
ISSUES = 3  # github.get_issue cycles over these, so no two calls in a row repeat
NOOP = "bench.noop"
FLOOR_WORKFLOW = "bench.Floor"
FLOOR_TIMEOUT = timedelta(seconds=30)
_PLAN = re.compile(r"(\w+)=(\S+)")
_SUMMARY = re.compile(r"Summary after (\d+) steps; the request was: (.*)$", re.M)

# Per process: perf_counter() at the start of every model call (or floor no-op), by task id,
# and the model activity's own time (database work, without the simulated latency).
STEP_STARTS: dict[str, list[float]] = defaultdict(list)
MODEL_BODY_MS: dict[str, list[float]] = defaultdict(list)


@dataclass(frozen=True)
class Plan:
    """What the scripted model does for a task: `steps` model calls, a tool call in each but
    the last, `model_ms` of simulated provider latency per call."""

    steps: int = 5
    tool: str = "memory.search"  # memory.search | memory.save | github.get_issue | mixed
    model_ms: float = 0.0
    repo: str = BENCH_REPO

    def request(self) -> str:
        return f"bench plan: steps={self.steps} tool={self.tool} model_ms={self.model_ms:g} repo={self.repo}"

    @classmethod
    def parse(cls, text: str) -> Plan:
        values = dict(_PLAN.findall(text))
        return cls(
            steps=int(values.get("steps", cls.steps)),
            tool=values.get("tool", cls.tool),
            model_ms=float(values.get("model_ms", cls.model_ms)),
            repo=values.get("repo", cls.repo),
        )

    def call(self, step: int) -> ToolCall:
        tool = self.tool
        if tool == "mixed":
            tool = "github.get_issue" if step % 2 else "memory.search"
        arguments: dict[str, Any]
        if tool == "github.get_issue":
            arguments = {"repo": self.repo, "number": 1 + step % ISSUES}
        elif tool == "memory.save":
            arguments = {"content": f"bench decision {step}: we keep the ledger in Postgres"}
        else:
            arguments = {"query": f"what did we decide about the ledger (step {step})"}
        return ToolCall(f"call_{step}", model_tool_name(tool), json.dumps(arguments))


def scripted_answer(plan: Plan, stored: list[dict[str, Any]], purpose: str) -> tuple[str, list[ToolCall]]:
    """The answer to the next call: a tool call until the plan's last step, then a reply.
    `stored` is what the prompt is built from: after a summary, the summary and what came
    since, so a summary carries the steps it sums up and the request (see `task_request`)."""
    done = steps_done(stored)
    step = 1 + done
    if purpose == "summary":
        calls = [c["name"] for m in stored if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        since = "; ".join(f"{name} returned results" for name in calls)
        return f"Summary after {done} steps; the request was: {plan.request()}\nSince: {since}"[:1500], []
    if purpose == "final" or step >= plan.steps:
        return f"Done after {step} steps.", []
    return "", [plan.call(step)]


def _latest_summary(stored: list[dict[str, Any]]) -> re.Match[str] | None:
    found = None
    for m in stored:
        if m["role"] == SUMMARY_ROLE:
            found = _SUMMARY.match(str(m.get("content") or "")) or found
    return found


def steps_done(stored: list[dict[str, Any]]) -> int:
    """Model steps taken so far: those the latest summary sums up, and the answers since."""
    summary = _latest_summary(stored)
    return (int(summary.group(1)) if summary else 0) + sum(1 for m in stored if m["role"] == "assistant")


def task_request(stored: list[dict[str, Any]]) -> str:
    """The task's request: as the latest summary recorded it (the request itself is no longer
    in the prompt then), else its first user message that is not the recalled memories (which
    come first once an earlier task in the channel saved one)."""
    summary = _latest_summary(stored)
    if summary is not None:
        return summary.group(2)
    users = (str(m.get("content") or "") for m in stored if m["role"] == "user")
    return next((text for text in users if not text.startswith(MEMORIES_HEADER)), "")


@activity.defn(name=ActivityName.CALL_MODEL)
async def scripted_model(inp: ModelCallInput) -> ModelCallResult:
    """The model activity's bookkeeping around a scripted answer (see the module docstring)."""
    started = time.perf_counter()
    STEP_STARTS[inp.task_id].append(started)
    pool = await runtime().pool()
    prepared = await prepare_call(pool, inp)
    if prepared.cached is not None:
        return prepared.cached
    plan = Plan.parse(task_request(prepared.stored))
    slept = time.perf_counter()
    if plan.model_ms:
        await asyncio.sleep(plan.model_ms / 1000)
    slept = time.perf_counter() - slept
    text, calls = scripted_answer(plan, prepared.stored, inp.purpose)
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
    MODEL_BODY_MS[inp.task_id].append((time.perf_counter() - started - slept) * 1000)
    return result


# The floor ----------------------------------------------------------------------------------


@dataclass
class FloorInput:
    steps: int
    local: bool = False


@dataclass
class NoopInput:
    step: int


@activity.defn(name=NOOP)
async def noop(inp: NoopInput) -> None:
    STEP_STARTS[activity.info().workflow_id or ""].append(time.perf_counter())


@workflow.defn(name=FLOOR_WORKFLOW)
class FloorWorkflow:
    """N steps of one no-op activity each: what a step costs when it does nothing."""

    @workflow.run
    async def run(self, inp: FloorInput) -> int:
        for step in range(1, inp.steps + 1):
            if inp.local:
                await workflow.execute_local_activity(
                    NOOP, NoopInput(step), start_to_close_timeout=FLOOR_TIMEOUT
                )
            else:
                await workflow.execute_activity(NOOP, NoopInput(step), start_to_close_timeout=FLOOR_TIMEOUT)
        return inp.steps
