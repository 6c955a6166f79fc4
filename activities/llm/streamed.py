"""Asking a model with its answer streamed: the text goes to a sink (the Slack thread) as the
model writes it, and the call still returns the whole answer the workflow decides on.

LiteLLM's stream is read chunk by chunk; text before any tool call is handed on, and the
first tool call tells the sink the answer is not one to show (`tool_calls`). The chunks are
rebuilt into one response with LiteLLM's `stream_chunk_builder`, so usage and cost come out
exactly as for an unstreamed call (`providers.result_of`). The offline stand-in's reply is
handed on in pieces too, so the embedded stack streams without a provider.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from temporalio.exceptions import ApplicationError

from activities.providers import (
    ProviderCall,
    call_provider,
    classify_error,
    completion_kwargs,
    provider_of,
    quiet_litellm,
    result_of,
)
from workflows.errors import ErrorType
from workflows.types import ModelCallResult


class AnswerSink(Protocol):
    """Where a streamed answer goes. Never raises: showing it is not the call's job."""

    async def text(self, delta: str) -> None: ...

    async def discard(self) -> None:
        """The answer calls tools, or this model failed: take back what was shown."""


# Routes whose streamed tool calls LiteLLM rebuilds wrongly: an Ollama call with no
# arguments (`{}`) gets no id and is dropped. With tools offered they are asked whole, and the
# answer's text is handed on at once.
WHOLE_WHEN_TOOLS = frozenset({"ollama", "ollama_chat"})


async def call_provider_streaming(call: ProviderCall, sink: AnswerSink) -> ModelCallResult:
    import litellm

    quiet_litellm()
    if call.tools and provider_of(call.model) in WHOLE_WHEN_TOOLS:
        result = await call_provider(call)
        if not result.tool_calls and result.text:
            await sink.text(result.text)
        return result
    kwargs = completion_kwargs(call) | {"stream": True, "stream_options": {"include_usage": True}}
    chunks: list[Any] = []
    calls_tools = False
    try:
        response = await litellm.acompletion(**kwargs)
        async for chunk in response:  # type: ignore[union-attr]
            chunks.append(chunk)
            delta = chunk.choices[0].delta if chunk.choices else None
            if delta is None:
                continue
            if getattr(delta, "tool_calls", None) and not calls_tools:
                calls_tools = True
                await sink.discard()
            content = getattr(delta, "content", None)
            if content and not calls_tools:
                await sink.text(content)
    except Exception as exc:  # noqa: BLE001 - classified below
        raise classify_error(call.model, exc) from None
    built = litellm.stream_chunk_builder(chunks, messages=call.messages)
    if built is None:
        raise ApplicationError(
            f"{call.model}: the provider's stream ended without an answer", type=ErrorType.MODEL_UNAVAILABLE
        )
    return result_of(call, built)


_PIECE = re.compile(r"\S+\s*|\s+")


async def stream_offline(text: str, sink: AnswerSink) -> None:
    """The offline reply, word by word (a handful of words a piece)."""
    words = _PIECE.findall(text)
    for start in range(0, len(words), 8):
        await sink.text("".join(words[start : start + 8]))
