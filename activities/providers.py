"""The provider layer: one LiteLLM call, its usage and cost (its errors: `provider_errors`).

Kept apart from the model activity so the activity's bookkeeping does not depend on any
provider. LiteLLM's own retries are off; the error type and `next_retry_delay` tell
Temporal whether and when to retry.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from activities.provider_errors import classify_error, provider_of
from workflows.types import ModelCallResult, ModelUsage, ToolCall

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# LiteLLM fetches Anthropic's beta-header table from the network at call time otherwise.
os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")

# Where to send OpenAI-compatible calls instead of the provider's default (a gateway, a
# local server, or the fake provider in the tests). Other providers read LiteLLM's own
# variables (ANTHROPIC_API_BASE, OLLAMA_API_BASE, …), so a policy can fall back from a local
# server to a hosted provider.
API_BASE_ENV = "OPENLOOP_MODEL_API_BASE"
OPENAI_COMPATIBLE = frozenset(
    {
        "openai",
        "text-completion-openai",
        "custom_openai",
        "openai_like",
        "hosted_vllm",
        "lm_studio",
        "litellm_proxy",
    }
)


# LiteLLM's loggers: below WARNING they only say what our own log already says.
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")
_quieted = False


def quiet_litellm() -> None:
    """Keep LiteLLM's banner ("Give Feedback / Get Help"), its debug hints and its info
    logging out of the worker's output: our error classification says what went wrong.
    Idempotent and cheap; called wherever LiteLLM is first used."""
    global _quieted
    if _quieted:
        return
    import litellm

    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    for name in LITELLM_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    _quieted = True


@dataclass
class ProviderCall:
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int
    timeout_seconds: float
    prompt_tokens_estimate: int
    output_schema: dict[str, Any] | None = None  # a structured answer, where the model can


def price_per_token(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token from LiteLLM's local cost map; None when unknown."""
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:  # noqa: BLE001 - LiteLLM raises plain Exception for unmapped models
        return None
    input_price = info.get("input_cost_per_token")
    output_price = info.get("output_cost_per_token")
    if input_price is None or output_price is None:
        return None
    return float(input_price), float(output_price)


async def call_provider(call: ProviderCall) -> ModelCallResult:
    import litellm

    quiet_litellm()
    kwargs = completion_kwargs(call)
    try:
        response = await litellm.acompletion(**kwargs)
    except Exception as exc:  # noqa: BLE001 - classified below
        # `from None`: the cause chain goes into workflow history, and some providers echo
        # the request (with its key) in their error text.
        raise classify_error(call.model, exc) from None
    return result_of(call, response)


def completion_kwargs(call: ProviderCall) -> dict[str, Any]:
    """LiteLLM's arguments for `call`: its own retries off, the API base when one is set."""
    kwargs: dict[str, Any] = {
        "model": call.model,
        "messages": call.messages,
        "max_tokens": call.max_tokens,
        "timeout": call.timeout_seconds,
        "num_retries": 0,
        "max_retries": 0,
    }
    if call.tools:
        kwargs["tools"] = call.tools
    if call.output_schema is not None and supports_structured_output(call.model):
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "step_output", "schema": call.output_schema},
        }
    if os.environ.get(API_BASE_ENV) and provider_of(call.model) in OPENAI_COMPATIBLE:
        kwargs["api_base"] = os.environ[API_BASE_ENV]
    return kwargs


def supports_structured_output(model: str) -> bool:
    """Whether LiteLLM's model map says `model` answers in a given JSON schema."""
    import litellm

    try:
        return bool(litellm.supports_response_schema(model=model))
    except Exception:  # noqa: BLE001 - an unmapped model: ask in words only
        return False


def result_of(call: ProviderCall, response: Any) -> ModelCallResult:
    """The workflow's view of a provider's answer: text, tool calls, usage and its cost.

    An answer with neither text nor a tool call is not an answer: it ends `refused` (the
    provider's refusal or content filter) or `empty`, with what the provider said of it."""
    choice = response.choices[0]
    message = choice.message
    tool_calls = [
        ToolCall(tc.id or f"call_{index}", tc.function.name, tc.function.arguments or "{}")
        for index, tc in enumerate(message.tool_calls or [])
    ]
    usage = usage_of(call, getattr(response, "usage", None))
    text = message.content or ""
    provider_finish = str(choice.finish_reason or "")
    refusal = refusal_of(message)
    if tool_calls:
        finish = "tool_calls"
    elif provider_finish == "length":
        finish = "length"
    elif refusal or provider_finish == "content_filter":
        finish = "refused"
        refusal = refusal or text  # Anthropic's refusal is its text, with stop_reason "refusal"
    elif not text.strip():
        finish = "empty"
    else:
        finish = "stop"
    return ModelCallResult(
        text=text,
        tool_calls=tool_calls,
        finish_reason=finish,
        usage=usage,
        transcript_upto=0,
        max_tokens_used=call.max_tokens,
        provider_finish=provider_finish,
        refusal=refusal,
    )


def refusal_of(message: Any) -> str:
    """The refusal text a provider sent instead of an answer (OpenAI's `refusal`), if any."""
    refusal = getattr(message, "refusal", None)
    if not refusal:
        refusal = (getattr(message, "provider_specific_fields", None) or {}).get("refusal")
    return str(refusal or "")


def usage_of(call: ProviderCall, usage: Any) -> ModelUsage:
    """The answer's usage in every provider's terms (cached and cache-written input,
    reasoning output), priced with LiteLLM's cost map, which prices each kind at its rate."""
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or call.prompt_tokens_estimate)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    cached = int(getattr(prompt_details, "cached_tokens", 0) or 0)
    cache_write = int(
        getattr(prompt_details, "cache_creation_tokens", 0)
        or getattr(usage, "cache_creation_input_tokens", 0)
        or 0
    )
    reasoning = int(getattr(completion_details, "reasoning_tokens", 0) or 0)
    return ModelUsage(
        call.model,
        prompt_tokens,
        completion_tokens,
        cost_of(call.model, usage, prompt_tokens, completion_tokens),
        cached_tokens=cached,
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning,
    )


def cost_of(model: str, usage: Any, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for the answer by LiteLLM's cost map; 0.0 for a model the map does not price."""
    import litellm

    if price_per_token(model) is None:
        return 0.0
    try:
        if usage is not None and getattr(usage, "prompt_tokens", None):
            prompt_cost, completion_cost = litellm.cost_per_token(model=model, usage_object=usage)
        else:  # no usage from the provider: the prompt as estimated, nothing for cache
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
    except Exception:  # noqa: BLE001 - a usage shape the calculator cannot read: list prices
        input_price, output_price = price_per_token(model) or (0.0, 0.0)
        return prompt_tokens * input_price + completion_tokens * output_price
    return float(prompt_cost) + float(completion_cost)
