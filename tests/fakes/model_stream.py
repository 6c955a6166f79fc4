"""The OpenAI Chat Completions wire of the fake model API: its bodies, errors and streams.

Shapes follow OpenAI's Chat Completions reference. A `chat.completion` body carries
`message.content`, `message.refusal` (a scripted refusal replaces the content, which is then
null) and `tool_calls`, a `finish_reason`, and `usage` with `prompt_tokens` (cached ones
included), `prompt_tokens_details.cached_tokens` and `completion_tokens_details.reasoning_tokens`
(OpenAI reports no cache-creation count). Errors are `{"error": {"message", "type", "param",
"code"}}`; the 401 message echoes the key it was given, as some compatible servers do.

Streamed (`"stream": true`), as OpenAI's streaming reference describes: server-sent events,
one `chat.completion.chunk` per piece of the scripted content (the role first, then
`delta.content` pieces of `chunk_chars` characters, `chunk_delay` seconds apart; a refusal streams
as `delta.refusal` pieces instead), then the tool calls, each keyed by its `index`: a first chunk
with `id`, `type` and `function.name`, then `function.arguments` in several pieces (parallel
calls one after the other), a last chunk with `finish_reason`, a usage chunk when
`stream_options.include_usage` asks for it, then `data: [DONE]`. `cut_after` ends the stream
with an error event after that many content pieces, as a provider failing mid-answer does.

`StreamPlan`, `pieces`, `arguments_object` and `open_stream` are shared with the Anthropic and Ollama wires.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.model_api import Scripted

ARGUMENT_PIECES = 3  # a tool call's arguments arrive in this many pieces, as real streams split them


ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    503: ("server_error", "overloaded"),
}


@dataclass
class StreamPlan:
    chunk_chars: int = 8
    chunk_delay: float = 0.0
    cut_after: int | None = None


def pieces(text: str, count: int) -> list[str]:
    """`text` cut into at most `count` consecutive non-empty pieces (one empty piece for "")."""
    if not text:
        return [""]
    size = -(-len(text) // max(1, count))
    return [text[start : start + size] for start in range(0, len(text), size)]


def arguments_object(arguments: str) -> dict[str, Any]:
    """A scripted call's arguments (JSON text) as an object: {} when the text is not a JSON object."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def open_stream(handler: BaseHTTPRequestHandler, content_type: str) -> None:
    """Start a 200 answer whose body runs until the connection closes."""
    handler.close_connection = True
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()


def error_body(status: int, message: str, api_key: str) -> dict[str, Any]:
    kind, code = ERRORS.get(status, ("server_error", "error"))
    if not message and status == 401:
        message = f"Incorrect API key provided: {api_key}. You can find your API key in your account."
    return {"error": {"message": message or f"error {status}", "type": kind, "param": None, "code": code}}


def completion(entry: Scripted, model: str, number: int) -> dict[str, Any]:
    """The non-streamed answer: a `chat.completion` object."""
    content = None if entry.refusal is not None else entry.content
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": entry.refusal}
    if entry.tool_calls:
        message["tool_calls"] = entry.tool_calls
    finish = entry.finish_reason or ("tool_calls" if entry.tool_calls else "stop")
    prompt, output = entry.prompt_tokens, entry.completion_tokens
    details = {"audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    return {
        "id": f"chatcmpl-fake{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": entry.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": entry.reasoning_tokens, **details},
        },
    }


def send_stream(
    handler: BaseHTTPRequestHandler, completion: dict[str, Any], plan: StreamPlan, include_usage: bool
) -> list[float]:
    """Write `completion` as server-sent events; the monotonic times the content pieces left."""
    open_stream(handler, "text/event-stream")
    sent: list[float] = []
    choice = completion["choices"][0]
    message = choice["message"]
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"

    def write(chunk: dict[str, Any]) -> None:
        handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        handler.wfile.flush()

    def event(delta: dict[str, Any], finish: str | None = None) -> None:
        write({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    try:
        refusal = message.get("refusal")
        field, text = ("refusal", refusal) if refusal else ("content", message.get("content") or "")
        event({"role": "assistant", field: ""})
        size = max(1, plan.chunk_chars)
        for index, start in enumerate(range(0, len(text), size)):
            if plan.cut_after is not None and index >= plan.cut_after:
                failure = {
                    "error": {
                        "message": "The server had an error while processing your request.",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                }
                write(failure)
                return sent  # the answer breaks off mid-stream, as a provider's outage does
            if plan.chunk_delay and index:
                time.sleep(plan.chunk_delay)
            event({field: text[start : start + size]})
            sent.append(time.monotonic())
        for position, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            head = {"index": position, "id": call["id"], "type": "function"}
            event({"tool_calls": [{**head, "function": {"name": function["name"], "arguments": ""}}]})
            for piece in pieces(function["arguments"], ARGUMENT_PIECES):
                event({"tool_calls": [{"index": position, "function": {"arguments": piece}}]})
        event({}, choice["finish_reason"])
        if include_usage:
            write({**base, "choices": [], "usage": completion["usage"]})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up
    return sent
