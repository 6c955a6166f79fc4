"""The Ollama chat wire of the fake model API: `POST /api/chat`.

Shapes follow Ollama's API documentation for `/api/chat`:

- a non-streamed answer is one JSON object: `model`, `created_at`, `message` (`role`,
  `content`, and `tool_calls` as `{"function": {"name", "arguments"}}` with the arguments as a
  JSON object, not text), `done: true`, `done_reason` ("stop" or "length"), and the counts and
  durations: `prompt_eval_count` (a script's `prompt_tokens`), `eval_count`
  (`completion_tokens`), `total_duration`, `load_duration`, `prompt_eval_duration`,
  `eval_duration` (nanoseconds).
- a stream (Ollama's default when the request does not say `"stream": false`) is
  newline-delimited JSON (`application/x-ndjson`): one `done: false` object per content piece,
  one carrying the tool calls, then a last `done: true` object with `done_reason` and the counts.
  A stream cut by `StreamPlan.cut_after` ends with an `{"error": ...}` line, as Ollama's do.
- errors are `{"error": "<text>"}` with the status (404 for an unknown model, 400, 500, ...).

Ollama has no tool-call ids, no refusals and no cache or reasoning counts: a scripted refusal
is sent as the content, cached and reasoning counts are not sent, tool-call ids are dropped.
Finish reasons map "length" to "length" and everything else to "stop". Arguments that are not
a JSON object are sent as `{}`.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from tests.fakes.model_stream import StreamPlan, arguments_object, open_stream

if TYPE_CHECKING:
    from tests.fakes.model_api import Scripted

DURATION = 1_000_000  # nanoseconds per counted token, for the durations Ollama reports


def error_body(status: int, message: str, model: str) -> dict[str, Any]:
    if not message:
        message = {
            404: f'model "{model}" not found, try pulling it first',
            400: "invalid request",
            401: "unauthorized",
        }.get(status, "an error was encountered while running the model")
    return {"error": message}


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def chat(entry: Scripted, model: str) -> dict[str, Any]:
    """The non-streamed answer: Ollama's chat response object."""
    text = entry.refusal if entry.refusal is not None else entry.content
    message: dict[str, Any] = {"role": "assistant", "content": text or ""}
    if entry.tool_calls:
        message["tool_calls"] = [
            {
                "function": {
                    "name": call["function"]["name"],
                    "arguments": arguments_object(call["function"]["arguments"]),
                }
            }
            for call in entry.tool_calls
        ]
    return {
        "model": model,
        "created_at": _now(),
        "message": message,
        "done": True,
        "done_reason": "length" if entry.finish_reason == "length" else "stop",
        "total_duration": DURATION * (entry.prompt_tokens + entry.completion_tokens + 1),
        "load_duration": DURATION,
        "prompt_eval_count": entry.prompt_tokens,
        "prompt_eval_duration": DURATION * entry.prompt_tokens,
        "eval_count": entry.completion_tokens,
        "eval_duration": DURATION * entry.completion_tokens,
    }


def send_stream(handler: BaseHTTPRequestHandler, answer: dict[str, Any], plan: StreamPlan) -> list[float]:
    """Write `answer` (from `chat`) as Ollama's NDJSON stream; when the content pieces left."""
    open_stream(handler, "application/x-ndjson")
    sent: list[float] = []
    model = answer["model"]

    def line(payload: dict[str, Any]) -> None:
        handler.wfile.write(json.dumps(payload).encode() + b"\n")
        handler.wfile.flush()

    def piece(message: dict[str, Any]) -> None:
        line(
            {"model": model, "created_at": _now(), "message": {"role": "assistant", **message}, "done": False}
        )

    try:
        text = answer["message"]["content"]
        size = max(1, plan.chunk_chars)
        for index, start in enumerate(range(0, len(text), size)):
            if plan.cut_after is not None and index >= plan.cut_after:
                line({"error": "an error was encountered while running the model: unexpected EOF"})
                return sent
            if plan.chunk_delay and index:
                time.sleep(plan.chunk_delay)
            piece({"content": text[start : start + size]})
            sent.append(time.monotonic())
        if answer["message"].get("tool_calls"):
            piece({"content": "", "tool_calls": answer["message"]["tool_calls"]})
        line({**answer, "created_at": _now(), "message": {"role": "assistant", "content": ""}})
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up
    return sent
