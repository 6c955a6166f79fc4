"""Asking the model for one built prompt: the policy's models in order, each call's max_tokens
clamped to what the task's budget buys, the monthly budget held around it.

A prompt the model's context window cannot hold fails here as a non-retryable
`PromptTooLarge` error naming its size and the window: no budget can make it fit, so it is
never reported as a budget refusal. The offline stand-in answers without a provider; every
other model goes through `providers.call_provider`, the bare LiteLLM call.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import offline as offline_model
from activities.llm import health
from activities.llm.budget_hold import budget_hold
from activities.llm.compaction import estimate_tokens
from activities.llm.scripted import SCRIPTED_PREFIX, ask_scripted
from activities.llm.streamed import AnswerSink, call_provider_streaming, stream_offline
from activities.providers import ProviderCall, call_provider, price_per_token
from workflows.budget import MIN_USEFUL_MAX_TOKENS
from workflows.errors import ErrorType
from workflows.types import ModelCallInput, ModelCallResult, ModelUsage

# The window assumed for a model neither the agent's policy nor LiteLLM's cost map sizes.
DEFAULT_CONTEXT_WINDOW = 128_000


async def ask_with_fallbacks(
    inp: ModelCallInput,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    sink: AnswerSink | None = None,
) -> ModelCallResult:
    """Try the policy's models in order; a model that cannot serve (auth, not found, outage,
    a window too small) hands over to the next, and one without a key or whose provider
    rejected its key lately is not asked at all (`health`). If all fail, the first retryable
    error decides the retry. With a `sink`, the answer's text streams there as it is
    written; what a failed model streamed is taken back before the next one answers."""
    failures: list[ApplicationError] = []
    for model in inp.route:
        skipped = health.unavailable(model)
        if skipped is not None:
            failures.append(skipped)
            continue
        try:
            return await ask(inp, model, messages, tools, sink)
        except ApplicationError as err:
            if sink is not None:
                await sink.discard()
            health.observe(model, err)
            failures.append(err)
            activity.logger.warning("model %s failed: %s", model, err.message)
    retryable = [f for f in failures if not f.non_retryable]
    if retryable:
        raise retryable[0]
    if failures:
        raise failures[0]
    raise ApplicationError(
        "the model policy names no model", type=ErrorType.MODEL_BAD_REQUEST, non_retryable=True
    )


async def ask(
    inp: ModelCallInput,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    sink: AnswerSink | None = None,
) -> ModelCallResult:
    grant = inp.budget
    if model.startswith(SCRIPTED_PREFIX):  # an eval case's own answers (`openloop eval run`)
        return await ask_scripted(inp, model, messages)
    if model.startswith("offline/"):
        prompt_tokens = estimate_tokens(messages)
        check_fits(inp, model, prompt_tokens)
        reply = offline_model.respond(messages, inp.offered_tools)
        if sink is not None and not reply.tool_calls:
            await stream_offline(reply.text, sink)
        completion_tokens = estimate_tokens([{"content": reply.text, "tool_calls": reply.tool_calls}])
        return ModelCallResult(
            text=reply.text,
            tool_calls=reply.tool_calls,
            finish_reason="tool_calls" if reply.tool_calls else "stop",
            usage=ModelUsage(model, prompt_tokens, completion_tokens, 0.0),
            transcript_upto=0,
            max_tokens_used=grant.max_tokens,
            offline=True,
        )
    prompt_tokens = _count_tokens(model, messages, tools)
    check_fits(inp, model, prompt_tokens)
    max_tokens = min(grant.max_tokens, max(0, grant.token_headroom - prompt_tokens))
    prices = price_per_token(model)
    if prices is None:
        if inp.task.on_exceeded == "block":
            return refused(
                model,
                f"no price is known for {model}, so its cost cannot be bounded; "
                "name a priced model in spec.model_policy or set spec.budget.on_exceeded: warn",
                resumable=False,
            )
    else:
        input_price, output_price = prices
        prompt_cost = prompt_tokens * input_price
        if output_price > 0:
            affordable = int((grant.usd_headroom - prompt_cost) / output_price)
            max_tokens = min(max_tokens, affordable)
    if max_tokens < MIN_USEFUL_MAX_TOKENS:
        return refused(model, f"the budget left cannot cover a call to {model}")
    async with budget_hold(inp, model, prompt_tokens, max_tokens, prices) as hold:
        if hold.refused is not None:
            return refused(model, hold.refused, resumable=False)
        schema = inp.task.output_schema if inp.purpose != "summary" else None
        call = ProviderCall(
            model, messages, tools, hold.max_tokens, inp.timeout_seconds, prompt_tokens, schema
        )
        result = await (call_provider(call) if sink is None else call_provider_streaming(call, sink))
        hold.charge(result.usage.cost_usd)
    return result


def context_window(inp: ModelCallInput, model: str) -> int:
    """The prompt tokens `model` can take: the agent's policy says, else LiteLLM's cost map."""
    if inp.task.context_window:
        return inp.task.context_window
    if model.startswith(("offline/", SCRIPTED_PREFIX)):
        return DEFAULT_CONTEXT_WINDOW
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:  # noqa: BLE001 - LiteLLM raises plain Exception for unmapped models
        return DEFAULT_CONTEXT_WINDOW
    return int(info.get("max_input_tokens") or info.get("max_tokens") or DEFAULT_CONTEXT_WINDOW)


def check_fits(inp: ModelCallInput, model: str, prompt_tokens: int) -> None:
    """Raise PromptTooLarge when the prompt and the shortest useful answer overflow the window."""
    window = context_window(inp, model)
    if prompt_tokens + MIN_USEFUL_MAX_TOKENS > window:
        raise ApplicationError(
            f"{model}: the prompt is about {prompt_tokens} tokens, more than its context window "
            f"of {window} can take with room for an answer; summarise the conversation "
            "(a smaller TranscriptView.keep_tool_results or a summary) or route the task to a "
            "model with a larger window in spec.model_policy",
            {"prompt_tokens": prompt_tokens, "context_window": window, "model": model},
            type=ErrorType.PROMPT_TOO_LARGE,
            non_retryable=True,
        )


def refused(model: str, reason: str, *, resumable: bool = True) -> ModelCallResult:
    """A call the budget did not allow: nothing was asked, nothing is charged."""
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
        return int(litellm.token_counter(model=model, messages=messages, tools=tools or None))  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - an unknown tokenizer falls back to the estimate
        return estimate_tokens(messages)
