"""The transcript side of a model call: before the model is asked, read the task's constants,
run the folded tool calls, append their results and the call's new messages, and build the
prompt; after, store the answer with its usage row.

A previous attempt may have stored the answer to this very call and crashed before
reporting it: `prepare_call` finds it, so the model is asked (and charged) once. Tool
results are stored as history holds them (a large output as its bounded preview and a
reference), so the transcript never holds more than a prompt may carry.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from temporalio.exceptions import ApplicationError

from activities import genai_spans
from activities.llm.compaction import build_prompt
from activities.runtime import runtime
from activities.store import ledger, task_constants, transcript
from activities.store.tool_calls import bound_and_audit
from activities.store.transcript import SUMMARY_INSTRUCTION, SUMMARY_ROLE
from activities.tools.tool_activities import execute_tool
from workflows.errors import ErrorType
from workflows.tool_catalog import model_tool_name
from workflows.types import (
    ChatMessage,
    ModelCallInput,
    ModelCallResult,
    ModelUsage,
    ToolCall,
    ToolCallInput,
    ToolCallResult,
)


@dataclass(frozen=True)
class PreparedCall:
    """The transcript side of a model call, before the model is asked."""

    answer_seq: int  # where the answer goes
    stored: list[dict[str, Any]]  # the transcript rows the prompt is built from
    messages: list[dict[str, Any]]  # the prompt built from it with the task's view
    cached: ModelCallResult | None  # a previous attempt's answer to this very call
    tool_results: list[ToolCallResult] = field(default_factory=list)  # of the folded calls
    appended_upto: int = 0  # the last seq of the tool results and new messages


async def prepare_call(pool: AsyncConnectionPool, inp: ModelCallInput) -> PreparedCall:
    """Read the task's constants into `inp`, run the folded tool calls, append their results
    and the call's new messages, and build the prompt; or find the answer a previous attempt
    stored for this very call."""
    cursor = inp.cursor
    new_rows = [transcript.message_to_row(m) for m in cursor.new_messages]
    folded_count = len(inp.folded_calls)
    appended_upto = cursor.upto + folded_count + len(new_rows)
    if inp.purpose == "summary":
        new_rows.append({"role": "user", "content": SUMMARY_INSTRUCTION, "tool_calls": []})
    answer_seq = cursor.upto + folded_count + len(new_rows) + 1
    async with pool.connection() as conn:
        async with conn.pipeline():  # the constants and the answer check in one round trip
            constants = await task_constants.request(conn, inp.task_id)
            # A previous attempt may have finished the call and crashed before reporting: reuse
            # it, so the model is asked (and charged) once.
            cached = await transcript.load_one(conn, inp.task_id, answer_seq)
            inp.use_stored(await task_constants.received(constants))
        _check_constants(inp)
        if cached is not None and cached.get("_step") == inp.step and cached.get("_usage"):
            result = _result_from_stored(cached, answer_seq)
            result.tool_results = await _stored_tool_results(conn, inp, folded_count)
            return PreparedCall(answer_seq, [], [], result)
    folded = inp.folded_inputs()
    # No connection is held while the tools run: they take their own from the same pool, and
    # holding one here would let concurrent calls exhaust it waiting on each other.
    tool_rows, tool_results = await _run_folded(pool, folded)
    async with pool.connection() as conn:
        # Tool results answer the previous model message, so they come before anything new.
        async with conn.pipeline():  # the appends and the read in one round trip
            await transcript.append(conn, inp.task_id, cursor.upto + 1, tool_rows + new_rows)
            # Only what the prompt keeps: the read stays small as the task grows.
            stored = await transcript.load_for_prompt(conn, inp.task_id, answer_seq - 1, cursor.view)
    return PreparedCall(
        answer_seq, stored, build_prompt(stored, cursor.view), None, tool_results, appended_upto
    )


def _check_constants(inp: ModelCallInput) -> None:
    if inp.task_or_none() is None:
        raise ApplicationError(
            f"task {inp.task_id}: its model call leaves the task's constants (agent, models, tools) "
            "to the task_constants table, which has no row for it (was the database reset while "
            "the task ran?); start the task again",
            type=ErrorType.MODEL_BAD_REQUEST,
            non_retryable=True,
        )


async def _run_folded(
    pool: AsyncConnectionPool, calls: list[ToolCallInput]
) -> tuple[list[dict[str, Any]], list[ToolCallResult]]:
    """Run read-only tool calls as the tool activity would; their transcript rows hold the
    bounded result (the one the workflow gets), which a retry that finds the answer reuses."""
    rt = runtime()
    rows, results = [], []
    for call in calls:
        # A span of its own under the model call's, as the tool activity would have.
        with genai_spans.tool_span(call) as span:
            full = await execute_tool(call, rt)
            async with pool.connection() as conn:
                bounded = await bound_and_audit(conn, call, full)
            genai_spans.end_tool_span(span, call, bounded)
        message = ChatMessage(
            "tool",
            bounded.output,
            tool_call_id=call.call_id,
            name=model_tool_name(call.tool),
            content_ref=bounded.output_ref,
        )
        rows.append({**transcript.message_to_row(message), "_result": asdict(bounded)})
        results.append(bounded)
    return rows, results


async def _stored_tool_results(
    conn: AsyncConnection[Any], inp: ModelCallInput, count: int
) -> list[ToolCallResult]:
    if not count:
        return []
    upto = inp.cursor.upto
    cursor = await conn.execute(
        "SELECT message->'_result' AS result FROM transcript"
        " WHERE task_id = %s AND seq > %s AND seq <= %s ORDER BY seq",
        (inp.task_id, upto, upto + count),
    )
    return [ToolCallResult(**row["result"]) for row in await cursor.fetchall()]


async def record_answer(
    pool: AsyncConnectionPool, inp: ModelCallInput, result: ModelCallResult, answer_seq: int
) -> None:
    """The answer and its usage row, in one transaction: both or neither."""
    answer = {
        "role": SUMMARY_ROLE if inp.purpose == "summary" else "assistant",
        "content": result.text,
        "tool_calls": [asdict(call) for call in result.tool_calls],
        "_step": inp.step,
        "_usage": asdict(result.usage),
        "_finish_reason": result.finish_reason,
        "_provider_finish": result.provider_finish,
        "_refusal": result.refusal,
        "_offline": result.offline,
        "_max_tokens": result.max_tokens_used,
    }
    task = inp.task
    # Pipelined: BEGIN and both writes travel together, then COMMIT.
    async with pool.connection() as conn, conn.pipeline(), conn.transaction():
        await transcript.append(conn, inp.task_id, answer_seq, [answer])
        await ledger.write_usage(
            conn,
            ledger.UsageRow(
                task_id=inp.task_id,
                step=inp.step,
                agent=task.agent_name,
                workspace=task.workspace,
                channel=task.channel,
                surface=task.surface,
                model=result.usage.model,
                prompt_tokens=result.usage.prompt_tokens,
                completion_tokens=result.usage.completion_tokens,
                cost_usd=result.usage.cost_usd,
                cached_tokens=result.usage.cached_tokens,
                cache_write_tokens=result.usage.cache_write_tokens,
                reasoning_tokens=result.usage.reasoning_tokens,
            ),
        )


def _result_from_stored(message: dict[str, Any], seq: int) -> ModelCallResult:
    return ModelCallResult(
        text=message.get("content") or "",
        tool_calls=[ToolCall(**call) for call in message.get("tool_calls") or []],
        finish_reason=message.get("_finish_reason", "stop"),
        usage=ModelUsage(**message["_usage"]),
        transcript_upto=seq,
        max_tokens_used=int(message.get("_max_tokens", 0)),
        offline=bool(message.get("_offline")),
        provider_finish=message.get("_provider_finish", ""),
        refusal=message.get("_refusal", ""),
    )
