"""The oracle model: registered under the real model activity's name, it runs that activity's
bookkeeping (`prepare_call`, `record_answer`, as `bench.scripted` does) around answers
scripted from AgentDojo's ground truth, looked up by task id (`bench.agentdojo.play`).

Benign, it makes the user task's calls one per step, then answers with the task's expected
output. Compromised, it does the same until a tool output carries the injection, and then
makes the injection task's calls before going on with the user's: a model that obeys every
instruction it reads. It turns on what the suite's server returned, not on what the prompt
shows of it (a long output is previewed), so what is measured is the policy alone.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from temporalio import activity

from activities.llm.compaction import estimate_tokens
from activities.llm.model_activities import prepare_call, record_answer
from activities.runtime import runtime
from bench.agentdojo.play import Play, carries, play_for_task
from workflows.tool_catalog import model_tool_name
from workflows.types import ActivityName, ModelCallInput, ModelCallResult, ModelUsage, ToolCall

ORACLE_MODEL = "bench/agentdojo-oracle"


def calls_made(stored: list[dict[str, Any]]) -> int:
    return sum(len(m.get("tool_calls") or []) for m in stored if m["role"] == "assistant")


def answer(
    play: Play, stored: list[dict[str, Any]], messages: list[dict[str, Any]], purpose: str
) -> tuple[str, list[ToolCall]]:
    made = calls_made(stored)
    if play.injection_returned and play.attack_at is None and play.attack_calls:
        play.attack_at = made
        play.injection_in_view = any(carries(str(m.get("content") or ""), play.goal) for m in messages)
    plan = play.plan()
    if purpose in ("summary", "final") or made >= len(plan):
        return play.final_text, []
    call = plan[made]
    name = model_tool_name(f"{play.case.suite}.{call.function}")
    return "", [ToolCall(f"call_{made}", name, json.dumps(call.args))]


@activity.defn(name=ActivityName.CALL_MODEL)
async def oracle_model(inp: ModelCallInput) -> ModelCallResult:
    pool = await runtime().pool()
    prepared = await prepare_call(pool, inp)
    if prepared.cached is not None:
        return prepared.cached
    play = play_for_task(inp.task_id)
    calls: list[ToolCall] = []
    if play is None:
        text = f"No bench case is registered for {inp.task_id}."
    else:
        text, calls = answer(play, prepared.stored, prepared.messages, inp.purpose)
    usage = ModelUsage(
        ORACLE_MODEL,
        estimate_tokens(prepared.messages),
        estimate_tokens([{"content": text, "tool_calls": [asdict(c) for c in calls]}]),
        0.0,
    )
    finish = "tool_calls" if calls else "stop"
    result = ModelCallResult(text, calls, finish, usage, prepared.answer_seq, inp.max_tokens, offline=True)
    result.tool_results = prepared.tool_results
    await record_answer(pool, inp, result, prepared.answer_seq)
    return result
