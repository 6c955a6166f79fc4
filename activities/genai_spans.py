"""Model and tool calls as OpenTelemetry GenAI spans, so Langfuse, Phoenix or any OTLP backend
reads a task without a mapping.

Names and attributes follow OpenTelemetry's semantic conventions for generative AI as
released in semantic-conventions v1.41.0 (status Development: names may still change, which is
why the version is named here and in the tracer's schema URL). That version replaced
`gen_ai.system` with `gen_ai.provider.name`, so only the latter is set.

- `chat {model}` (kind CLIENT): one model call, with provider, request and response model,
  tokens, finish reason and its cost (`openloop.cost_usd`).
- `execute_tool {tool}` (kind INTERNAL): one tool call, with its name, call id and type.

Message content (the model's answer, a tool's arguments and result) goes on spans only when
`OPENLOOP_TRACE_MESSAGE_CONTENT` is on, as the conventions ask (off by default), and is then
masked like the audit ledger masks it. The worker's interceptor sets the tracer and that
choice for the activity it runs (`using`); code below it reads them with `current()`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from activities.store.ledger import mask_secrets
from workflows.types import ModelCallInput, ModelCallResult, ToolCallInput, ToolCallResult

SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
TRACER_NAME = "openloop"

# LiteLLM's provider prefixes, as the conventions name the provider (gen_ai.provider.name);
# a prefix not listed is passed as it is, which the conventions allow.
PROVIDERS = {
    "openai": "openai",
    "text-completion-openai": "openai",
    "anthropic": "anthropic",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "mistral": "mistral_ai",
    "groq": "groq",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "perplexity": "perplexity",
    "watsonx": "ibm.watsonx.ai",
    "offline": "openloop.offline",  # our stand-in when no provider key is set
}
# LiteLLM tells these providers by the model name alone.
BARE_PREFIXES = (
    ("gpt-", "openai"),
    ("chatgpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("claude", "anthropic"),
    ("gemini", "gcp.gemini"),
)
# Tools that read and write stored data are `datastore` tools in the conventions' words;
# every other tool is a function the agent calls.
DATASTORE_TOOL_PREFIXES = ("memory.",)


@dataclass(frozen=True)
class GenAiTracing:
    """Where GenAI spans go, and whether message content rides on them."""

    tracer: trace.Tracer
    capture_content: bool = False


_CURRENT: ContextVar[GenAiTracing | None] = ContextVar("openloop_genai_tracing", default=None)


def tracer_for(provider: trace.TracerProvider | None = None) -> trace.Tracer:
    """The tracer GenAI spans are made with; the process-wide provider unless one is given."""
    provider = provider or trace.get_tracer_provider()
    return provider.get_tracer(TRACER_NAME, schema_url=SCHEMA_URL)


def current() -> GenAiTracing:
    """The tracing the worker's interceptor set for this activity (the process-wide tracer,
    content off, outside one)."""
    return _CURRENT.get() or GenAiTracing(tracer_for())


@contextmanager
def using(tracing: GenAiTracing) -> Iterator[None]:
    token = _CURRENT.set(tracing)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def provider_name(model: str) -> str:
    """gen_ai.provider.name of a LiteLLM model string (`anthropic/claude-…` -> anthropic)."""
    prefix, slash, _ = model.partition("/")
    if slash:
        return PROVIDERS.get(prefix, prefix)
    lowered = model.lower()
    return next((name for start, name in BARE_PREFIXES if lowered.startswith(start)), "unknown")


def chat_request_attributes(inp: ModelCallInput) -> dict[str, AttributeValue]:
    """What is known of a model call before it runs."""
    model = inp.model or ""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(model),
        "gen_ai.request.model": model,  # the route's first; a fallback shows in response.model
        "gen_ai.request.max_tokens": inp.max_tokens,
        "gen_ai.conversation.id": inp.task_id,
        "openloop.task_id": inp.task_id,
        "openloop.step": inp.step,
        "openloop.purpose": inp.purpose,
    }


def chat_response_attributes(
    inp: ModelCallInput, result: ModelCallResult, capture_content: bool
) -> dict[str, AttributeValue]:
    """What a model call answered: model, tokens, finish reason, cost, and (opted in) the answer."""
    task = inp.task_or_none()  # the task's constants, read by the activity
    attributes: dict[str, AttributeValue] = {
        "openloop.agent": task.agent_name if task else "",
        "gen_ai.response.model": result.usage.model,
        "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": result.usage.completion_tokens,
        "gen_ai.response.finish_reasons": [result.finish_reason],
        "openloop.cost_usd": result.usage.cost_usd,
        "openloop.tool_calls": len(result.tool_calls),
        "openloop.offline": result.offline,
    }
    if result.usage.model:  # the model that answered names the provider (a fallback's may differ)
        attributes["gen_ai.provider.name"] = provider_name(result.usage.model)
    if result.usage.cached_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = result.usage.cached_tokens
    if capture_content:
        parts: list[dict[str, Any]] = [{"type": "text", "content": result.text}] if result.text else []
        parts += [
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
            for call in result.tool_calls
        ]
        message = {"role": "assistant", "parts": parts, "finish_reason": result.finish_reason}
        attributes["gen_ai.output.messages"] = _masked_json([message])
    return attributes


def tool_attributes(
    call: ToolCallInput, result: ToolCallResult | None, capture_content: bool
) -> dict[str, AttributeValue]:
    """One tool call's span attributes; `result` None before it has run."""
    kind = "datastore" if call.tool.startswith(DATASTORE_TOOL_PREFIXES) else "function"
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": call.call_id,
        "gen_ai.tool.type": kind,
        "gen_ai.conversation.id": call.task_id,
        "openloop.task_id": call.task_id,
        "openloop.step": call.step,
        "openloop.tool": call.tool,
        "openloop.tool.approved_by": call.approval.approver if call.approval else "",
    }
    if capture_content:
        attributes["gen_ai.tool.call.arguments"] = _masked_json(call.arguments)
    if result is not None:
        attributes["openloop.tool.ok"] = result.ok
        attributes["openloop.tool.error_kind"] = result.error_kind or ""
        if not result.ok:
            attributes["error.type"] = result.error_kind or "tool_error"
        if capture_content:
            attributes["gen_ai.tool.call.result"] = _masked_json(result.output)
    return attributes


@contextmanager
def tool_span(call: ToolCallInput) -> Iterator[trace.Span]:
    """An `execute_tool {tool}` span around running `call`; the caller adds the result
    with `end_tool_span`."""
    tracing = current()
    with tracing.tracer.start_as_current_span(
        f"execute_tool {call.tool}",
        kind=trace.SpanKind.INTERNAL,
        attributes=tool_attributes(call, None, tracing.capture_content),
    ) as span:
        yield span


def end_tool_span(span: trace.Span, call: ToolCallInput, result: ToolCallResult) -> None:
    if span.is_recording():
        span.set_attributes(tool_attributes(call, result, current().capture_content))


def _masked_json(value: Any) -> str:
    return json.dumps(mask_secrets(value), ensure_ascii=False, default=str)
