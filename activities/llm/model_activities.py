"""The model activity (`openloop.model.call`): a thin wrapper over named pieces.

- `transcript_step` — the task's constants (read with the answer check), the folded tool
  calls, the transcript appends and the prompt before the model is asked, the answer and
  its usage row after (or a previous attempt's answer).
- `ask` — the policy's models in order, max_tokens clamped to the task's budget, the
  context-window check, the offline stand-in.
- `budget_hold` — reserve, settle or release on the agent's monthly budget.
- `providers` — the bare LiteLLM call and its error classification (`streamed`: the same
  call with the answer's text handed on as it is written).
- `activities.slack.streaming` — where a Slack task's answer streams while it is written
  (the workflow names the thread in `inp.stream`), and what the thread shows meanwhile.

One activity does the whole step's bookkeeping, so a step costs one remote round trip for
the model, not one per write. Only Temporal retries: LiteLLM's own retries are off.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio import activity

from activities.llm.ask import ask_with_fallbacks, context_window
from activities.llm.streamed import AnswerSink
from activities.llm.transcript_step import PreparedCall, prepare_call, record_answer
from activities.runtime import runtime
from activities.slack import status as slack_status
from activities.slack import streaming
from activities.store import task_tools
from activities.tools.catalog import SPECS, model_tools
from workflows.tool_catalog import model_tool_name
from workflows.types import ActivityName, ModelCallInput, ModelCallResult

__all__ = ["HEARTBEAT_EVERY_SECONDS", "PreparedCall", "call_model", "prepare_call", "record_answer"]

HEARTBEAT_EVERY_SECONDS = 10.0


@activity.defn(name=ActivityName.CALL_MODEL)
async def call_model(inp: ModelCallInput) -> ModelCallResult:
    rt = runtime()
    pool = await rt.pool()
    shown = _show_step(inp)
    prepared = await prepare_call(pool, inp)
    if prepared.cached is not None:
        if inp.stream is not None:  # an earlier attempt streamed it: the closing reply edits that
            prepared.cached.streamed_ts = await streaming.streamed_before(pool, inp.task_id, inp.step)
        prepared.cached.context_window = context_window(inp, prepared.cached.usage.model)
        return prepared.cached
    attempt = activity.info().attempt if inp.stream is not None else 1  # only a streamed answer asks
    sink = await streaming.answer_stream(rt.settings, pool, inp, prepared.messages, attempt)
    async with _heartbeating():
        tools = await _offered_tools(pool, inp)
        try:
            result = await ask_with_fallbacks(inp, prepared.messages, tools, sink)
        except Exception:
            await _take_back(sink)
            raise
    if sink is not None:
        if result.tool_calls or result.finish_reason in ("budget", "refused", "empty"):
            await sink.discard()
        else:
            result.streamed_ts = await sink.finish()
    if shown is not None:
        await shown
    result.tool_results = prepared.tool_results
    # The window of the model that answered (after a fallback, maybe a smaller one), so the
    # workflow compacts the conversation in time for it.
    result.context_window = context_window(inp, result.usage.model)
    if result.finish_reason == "budget":
        # Nothing was asked: store no answer (nor a summary instruction), so the call that
        # resumes sends a clean prompt; later appends overwrite anything past this seq.
        result.transcript_upto = prepared.appended_upto
        return result
    await record_answer(pool, inp, result, prepared.answer_seq)
    result.transcript_upto = prepared.answer_seq
    return result


def _show_step(inp: ModelCallInput) -> asyncio.Task[None] | None:
    """Say in the thread what this call does first (the read-only tools it runs), alongside."""
    if inp.stream is None or not inp.folded_calls:
        return None
    note = ", ".join(dict.fromkeys(slack_status.doing(call.tool) for call in inp.folded_calls))
    return asyncio.create_task(streaming.show_step(runtime().settings, inp.task_id, inp.stream, note))


async def _take_back(sink: AnswerSink | None) -> None:
    if sink is not None:
        with contextlib.suppress(Exception):  # the retry removes it otherwise
            await sink.discard()


def model_tool_schemas(names: list[str]) -> list[dict[str, Any]]:
    """The tools the model is offered, in the provider's (OpenAI) format; unknown names are
    left out. The one place that reads the tool catalog for the model."""
    return [dict(schema) for schema in model_tools(names)]


async def _offered_tools(pool: AsyncConnectionPool, inp: ModelCallInput) -> list[dict[str, Any]]:
    """Declared tools from the catalog; the rest (MCP) as the task's start listed them."""
    names = inp.offered_tools
    native = model_tool_schemas(names)
    others = [name for name in names if name not in SPECS]
    listed = await task_tools.load_specs(pool, inp.task_id, others)
    by_name = {schema["function"]["name"]: schema for schema in native}
    by_name |= {spec.model_name: spec.openai_schema() for spec in listed.values()}
    return [by_name[model_tool_name(name)] for name in names if model_tool_name(name) in by_name]


@contextlib.asynccontextmanager
async def _heartbeating() -> AsyncIterator[None]:
    """Heartbeat while the model is asked, so a worker that died is noticed in a minute."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_EVERY_SECONDS)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
