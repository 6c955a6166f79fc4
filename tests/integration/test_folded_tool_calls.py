"""The model activity runs the read-only tool calls the workflow folded into it (real Postgres,
real memory search, LiteLLM against a local OpenAI-compatible server): the model reads their
bounded results (as untrusted data) right after its own tool calls, as the workflow gets them,
each call is audited once, and a retried attempt that finds the stored answer returns the
same results."""

from __future__ import annotations

import asyncio
import uuid

from activities.runtime import runtime
from activities.store.memory import remember
from activities.store.transcript import TOOL_OUTPUT_PREVIEW_CHARS
from config.agent import OFFLINE_EMBEDDING
from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.integration.model_env import call_input, rows, run
from workflows.types import ChatMessage, FoldedToolCall, MemoryScopeRef, SurfaceContext
from workflows.untrusted import wrap_untrusted

CONTEXT = SurfaceContext(surface="slack", channel="C0DEPLOY", user="U_BOB")


async def scope_with(decisions: list[str]) -> MemoryScopeRef:
    scope = MemoryScopeRef(
        f"ws-{uuid.uuid4().hex[:8]}", "helper", "channel", "slack:C0DEPLOY", OFFLINE_EMBEDDING, 30
    )
    pool = await runtime().pool()
    for n, decision in enumerate(decisions):
        await remember(pool, scope, decision, "seed", n, f"seed-{uuid.uuid4().hex}")
    return scope


async def test_folded_searches_run_first_and_reach_the_model_bounded(api: FakeModelAPI) -> None:
    decisions = [f"Deploy decision {n}: Tuesdays after a {n}-hour staging soak." for n in range(12)]
    scope = await scope_with(decisions)
    api.answer_tool_calls([tool_call("call_a", "memory__search", {"query": "deploy day", "k": 12})])
    start = call_input(tool_names=["memory.search"])
    task_id = start.task_id
    first = await run(start)

    api.answer("Tuesdays, after the soak.")
    folded = [FoldedToolCall(1, "call_a", "memory.search", {"query": "deploy day", "k": 12})]
    # The search the first answer asked for rides with the next call, before a user's message;
    # it acts where the task's row says.
    follow = call_input(
        task_id=task_id,
        step=2,
        transcript_upto=first.transcript_upto,
        tool_names=["memory.search"],
        new_messages=[ChatMessage("user", "U_BOB: and on holidays?")],
        fold=folded,
        context=CONTEXT,
        memory=scope,
    )
    result = await run(follow)

    assert result.text == "Tuesdays, after the soak."
    [searched] = result.tool_results
    assert searched.ok and searched.output_ref  # bounded for history, the whole output stored
    [stored] = await rows("SELECT content FROM tool_outputs WHERE ref = %s", searched.output_ref)
    assert len(stored["content"]) > TOOL_OUTPUT_PREVIEW_CHARS >= len(searched.output) - 80
    sent = api.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
    # The whole output is stored; the model reads the bounded preview, never the whole.
    assert sent[3]["tool_call_id"] == "call_a"
    assert sent[3]["content"] == wrap_untrusted(searched.output, "tool:memory.search")
    assert "Deploy decision" in stored["content"] and stored["content"] not in sent[3]["content"]
    assert sent[4]["content"] == "U_BOB: and on holidays?"
    # Two rows appended (the result and the message) and the answer after them.
    assert result.transcript_upto == first.transcript_upto + 3
    audits = await rows("SELECT key, tool, actor, outcome FROM audit_log WHERE task_id = %s", task_id)
    assert audits == [{"key": "1:call_a:tool", "tool": "memory.search", "actor": "U_BOB", "outcome": "ok"}]

    # A retry of an attempt that finished: the stored answer and the same tool results, with
    # the model asked and the search audited once.
    again = await run(follow)
    assert again == result and len(api.requests) == 2
    assert len(await rows("SELECT 1 FROM audit_log WHERE task_id = %s", task_id)) == 1


async def test_more_concurrent_calls_than_pool_connections_all_finish(db_settings: Settings) -> None:
    # Each folded search takes its own connection: a call must not hold one while it waits.
    scope = await scope_with(["We deploy on Tuesdays."])
    pool = await runtime().pool()
    calls = (pool.max_size or 10) + 4

    async def one(n: int) -> int:
        folded = [FoldedToolCall(1, f"call_{n}", "memory.search", {"query": "deploy"})]
        inp = call_input(models=["offline/demo"], fold=folded, context=CONTEXT, memory=scope)
        result = await run(inp)
        return len(result.tool_results)

    done = await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(calls))), timeout=25)
    assert done == [1] * calls
