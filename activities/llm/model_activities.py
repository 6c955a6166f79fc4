"""The model activity: append new messages to the transcript, ask the model, store its answer.

One activity does the whole step's bookkeeping (transcript appends, the usage row) in one
transaction, so a step costs one remote round trip for the model, not one per write. Only
Temporal retries: LiteLLM's own retries are off, provider errors are classified (429, 5xx
and timeouts retryable, honouring Retry-After; auth and bad requests not).

When the agent has a monthly budget (its own or per channel), each call first reserves its
worst case from the agent's budget workflow (`openloop.AgentBudget`), clamps max_tokens to
the grant, and settles the actual cost after; a call that fails releases its hold before
the error propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass, field
from typing import Any

from opentelemetry import trace
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.llm import offline as offline_model
from activities.llm.budget_client import (
    affordable_max_tokens,
    release_budget,
    reservation_key,
    reserve_budget,
    settle_budget,
    worst_case_usd,
)
from activities.llm.compaction import SUMMARY_INSTRUCTION, SUMMARY_ROLE, build_prompt, estimate_tokens
from activities.llm.providers import ProviderCall, call_provider, price_per_token
from activities.runtime import runtime
from activities.store import ledger, transcript
from activities.tools.tool_activities import bound_and_audit, execute_tool, record_tool_span_attributes
from workflows.budget import MIN_USEFUL_MAX_TOKENS
from workflows.budget_types import ReserveResult
from workflows.tool_catalog import NATIVE_TOOLS, model_tool_name
from workflows.types import (
    ActivityName,
    AuditEvent,
    ChatMessage,
    ModelCallInput,
    ModelCallResult,
    ModelUsage,
    ToolCall,
    ToolCallInput,
    ToolCallResult,
)

HEARTBEAT_EVERY_SECONDS = 10.0


@activity.defn(name=ActivityName.CALL_MODEL)
async def call_model(inp: ModelCallInput) -> ModelCallResult:
    pool = await runtime().pool()
    prepared = await prepare_call(pool, inp)
    if prepared.cached is not None:
        return prepared.cached
    tools = [NATIVE_TOOLS[name].openai_schema() for name in inp.tool_names if name in NATIVE_TOOLS]
    result = await _ask_with_fallbacks(inp, prepared.messages, tools)
    result.tool_results = prepared.tool_results
    if result.finish_reason == "budget":
        # Nothing was asked: store no answer (nor a summary instruction), so the call that
        # resumes sends a clean prompt; later appends overwrite anything past this seq.
        result.transcript_upto = prepared.appended_upto
        return result
    await record_answer(pool, inp, result, prepared.answer_seq)
    result.transcript_upto = prepared.answer_seq
    return result


@dataclass(frozen=True)
class PreparedCall:
    """The transcript side of a model call, before the model is asked."""

    answer_seq: int  # where the answer goes
    stored: list[dict[str, Any]]  # the transcript rows the prompt is built from
    messages: list[dict[str, Any]]  # the prompt built from it with the task's view
    cached: ModelCallResult | None  # a previous attempt's answer to this very call
    tool_results: list[ToolCallResult] = field(default_factory=list)  # of inp.run_first
    appended_upto: int = 0  # the last seq of the tool results and new messages


async def prepare_call(pool: AsyncConnectionPool, inp: ModelCallInput) -> PreparedCall:
    """Run the folded tool calls, append their results and the call's new messages, and
    build the prompt; or find the answer a previous attempt stored for this very call."""
    folded = inp.run_first.inputs(inp.task_id) if inp.run_first else []
    new_rows = [transcript.message_to_row(m) for m in inp.new_messages]
    appended_upto = inp.transcript_upto + len(folded) + len(new_rows)
    if inp.purpose == "summary":
        new_rows.append({"role": "user", "content": SUMMARY_INSTRUCTION, "tool_calls": []})
    answer_seq = inp.transcript_upto + len(folded) + len(new_rows) + 1
    async with pool.connection() as conn:
        # A previous attempt may have finished the call and crashed before reporting: reuse it,
        # so the model is asked (and charged) once.
        cached = await transcript.load_one(conn, inp.task_id, answer_seq)
        if cached is not None and cached.get("_step") == inp.step and cached.get("_usage"):
            result = _result_from_stored(cached, answer_seq)
            result.tool_results = await _stored_tool_results(conn, inp, len(folded))
            return PreparedCall(answer_seq, [], [], result)
    # No connection is held while the tools run: they take their own from the same pool, and
    # holding one here would let concurrent calls exhaust it waiting on each other.
    tool_rows, tool_results = await _run_folded(pool, folded)
    async with pool.connection() as conn:
        new_rows = await transcript.resolve_refs(conn, new_rows)
        # Tool results answer the previous model message, so they come before anything new.
        async with conn.pipeline():  # the appends and the read in one round trip
            await transcript.append(conn, inp.task_id, inp.transcript_upto + 1, tool_rows + new_rows)
            # Only what the prompt keeps: the read stays small as the task grows.
            stored = await transcript.load_for_prompt(conn, inp.task_id, answer_seq - 1, inp.view)
    return PreparedCall(answer_seq, stored, build_prompt(stored, inp.view), None, tool_results, appended_upto)


async def _run_folded(
    pool: AsyncConnectionPool, calls: list[ToolCallInput]
) -> tuple[list[dict[str, Any]], list[ToolCallResult]]:
    """Run read-only tool calls as the tool activity would; their transcript rows keep the
    whole output for the model and the bounded result for a retry that finds the answer."""
    rt = runtime()
    rows, results = [], []
    for call in calls:
        # A span of its own under the model call's, as the tool activity would have.
        with trace.get_tracer(__name__).start_as_current_span(f"RunTool:{call.tool}") as span:
            full = await execute_tool(call, rt)
            async with pool.connection() as conn:
                bounded = await bound_and_audit(conn, call, full)
            record_tool_span_attributes(span, call, bounded)
        message = ChatMessage("tool", full.output, tool_call_id=call.call_id, name=model_tool_name(call.tool))
        rows.append({**transcript.message_to_row(message), "_result": asdict(bounded)})
        results.append(bounded)
    return rows, results


async def _stored_tool_results(
    conn: AsyncConnection[Any], inp: ModelCallInput, count: int
) -> list[ToolCallResult]:
    if not count:
        return []
    cursor = await conn.execute(
        "SELECT message->'_result' AS result FROM transcript"
        " WHERE task_id = %s AND seq > %s AND seq <= %s ORDER BY seq",
        (inp.task_id, inp.transcript_upto, inp.transcript_upto + count),
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
        "_offline": result.offline,
        "_max_tokens": result.max_tokens_used,
    }
    # Pipelined: BEGIN and both writes travel together, then COMMIT.
    async with pool.connection() as conn, conn.pipeline(), conn.transaction():
        await transcript.append(conn, inp.task_id, answer_seq, [answer])
        await ledger.write_usage(
            conn,
            ledger.UsageRow(
                task_id=inp.task_id,
                step=inp.step,
                agent=inp.agent_name,
                workspace=inp.workspace,
                channel=inp.channel,
                surface=inp.surface,
                model=result.usage.model,
                prompt_tokens=result.usage.prompt_tokens,
                completion_tokens=result.usage.completion_tokens,
                cost_usd=result.usage.cost_usd,
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
    )


async def _ask_with_fallbacks(
    inp: ModelCallInput, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> ModelCallResult:
    """Try the policy's models in order; a model that cannot serve (auth, not found, outage)
    hands over to the next. If all fail, the first retryable error decides the retry."""
    failures: list[ApplicationError] = []
    for model in inp.models:
        try:
            return await _ask(inp, model, messages, tools)
        except ApplicationError as err:
            if err.type == "BudgetRefused":
                raise
            failures.append(err)
            activity.logger.warning("model %s failed: %s", model, err.message)
    retryable = [f for f in failures if not f.non_retryable]
    if retryable:
        raise retryable[0]
    if failures:
        raise failures[0]
    raise ApplicationError("the model policy names no model", type="ModelBadRequest", non_retryable=True)


async def _ask(
    inp: ModelCallInput, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> ModelCallResult:
    if model.startswith("offline/"):
        reply = offline_model.respond(messages, inp.tool_names)
        prompt_tokens = estimate_tokens(messages)
        completion_tokens = estimate_tokens([{"content": reply.text, "tool_calls": reply.tool_calls}])
        return ModelCallResult(
            text=reply.text,
            tool_calls=reply.tool_calls,
            finish_reason="tool_calls" if reply.tool_calls else "stop",
            usage=ModelUsage(model, prompt_tokens, completion_tokens, 0.0),
            transcript_upto=0,
            max_tokens_used=inp.max_tokens,
            offline=True,
        )
    prompt_tokens = _count_tokens(model, messages, tools)
    max_tokens = min(inp.max_tokens, max(0, inp.token_headroom - prompt_tokens))
    prices = price_per_token(model)
    if prices is None:
        if inp.on_exceeded == "block":
            return _refused(
                model,
                f"no price is known for {model}, so its cost cannot be bounded; "
                "name a priced model in spec.model_policy or set spec.budget.on_exceeded: warn",
                resumable=False,
            )
    else:
        input_price, output_price = prices
        prompt_cost = prompt_tokens * input_price
        if output_price > 0:
            affordable = int((inp.usd_headroom - prompt_cost) / output_price)
            max_tokens = min(max_tokens, affordable)
    if max_tokens < MIN_USEFUL_MAX_TOKENS:
        return _refused(model, f"the budget left cannot cover a call to {model}")
    hold: ReserveResult | None = None
    # A model without a price under `warn` cannot be held; it goes through unreserved.
    if prices is not None and (inp.monthly_usd is not None or inp.channel_monthly_usd is not None):
        hold = await _reserve(inp, model, prompt_tokens, max_tokens, prices)
        if not hold.granted:
            # A per-task extension cannot lift a monthly cap: the task stops right away.
            return _refused(model, hold.reason, resumable=False)
        max_tokens = affordable_max_tokens(hold.amount_usd, prompt_tokens, prices, max_tokens)
    heartbeat = asyncio.create_task(_heartbeat())
    try:
        result = await call_provider(
            ProviderCall(model, messages, tools, max_tokens, inp.timeout_seconds, prompt_tokens)
        )
    except BaseException:
        if hold is not None:
            await _release(inp, hold)
        raise
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
    if hold is not None:
        await _settle(inp, hold, result.usage.cost_usd)
    return result


async def _reserve(
    inp: ModelCallInput, model: str, prompt_tokens: int, max_tokens: int, prices: tuple[float, float]
) -> ReserveResult:
    """Hold the call's worst case in the agent's budget workflow, one key per attempt and
    model; the workflow runs on this activity's task queue."""
    return await reserve_budget(
        activity.client(),
        activity.info().task_queue,
        inp.workspace,
        inp.agent_name,
        reservation_key(inp.task_id, inp.step, activity.info().attempt, model),
        f"{inp.surface}:{inp.channel}",
        amount_usd=worst_case_usd(prompt_tokens, max_tokens, prices),
        minimum_usd=worst_case_usd(prompt_tokens, MIN_USEFUL_MAX_TOKENS, prices),
        monthly_usd=inp.monthly_usd,
        channel_monthly_usd=inp.channel_monthly_usd,
        on_exceeded=inp.on_exceeded,
    )


async def _settle(inp: ModelCallInput, hold: ReserveResult, cost_usd: float) -> None:
    """Charge the actual cost. The answer is paid for, so a failure here is logged, not raised
    (raising would ask the model again); the hold is then released after its TTL."""
    try:
        await settle_budget(
            activity.client(),
            activity.info().task_queue,
            inp.workspace,
            inp.agent_name,
            hold.key,
            hold.channel,
            cost_usd,
        )
    except Exception as err:  # noqa: BLE001 - see the docstring
        activity.logger.warning("could not settle budget hold %s: %s", hold.key, err)
    if hold.over_budget:
        pool = await runtime().pool()
        async with pool.connection() as conn:
            await ledger.write_audit(
                conn,
                AuditEvent(
                    task_id=inp.task_id,
                    step=inp.step,
                    key=f"{hold.key}:budget_overrun",
                    agent=inp.agent_name,
                    workspace=inp.workspace,
                    channel=inp.channel,
                    kind="budget_overrun",
                    actor=inp.agent_name,
                    outcome=f"{hold.reason}; the call cost ${cost_usd:.4f}",
                ),
            )


async def _release(inp: ModelCallInput, hold: ReserveResult) -> None:
    """Free the hold of a failed call; the call's own error is what propagates."""
    try:
        await release_budget(
            activity.client(), activity.info().task_queue, inp.workspace, inp.agent_name, hold.key
        )
    except Exception as err:  # noqa: BLE001 - the hold is released after its TTL instead
        activity.logger.warning("could not release budget hold %s: %s", hold.key, err)


def _refused(model: str, reason: str, *, resumable: bool = True) -> ModelCallResult:
    return ModelCallResult(
        text="",
        tool_calls=[],
        finish_reason="budget",
        usage=ModelUsage(model, 0, 0, 0.0),
        transcript_upto=0,
        max_tokens_used=0,
        refused_reason=reason,
        refused_resumable=resumable,
    )


def _count_tokens(model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    import litellm

    try:
        return int(litellm.token_counter(model=model, messages=messages, tools=tools or None))
    except Exception:  # noqa: BLE001 - an unknown tokenizer falls back to the estimate
        return estimate_tokens(messages)


async def _heartbeat() -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(HEARTBEAT_EVERY_SECONDS)
