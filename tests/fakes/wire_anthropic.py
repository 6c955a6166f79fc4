"""The Anthropic Messages wire of the fake model API: `POST /v1/messages`.

Shapes follow Anthropic's Messages API reference, its streaming guide and its errors page:

- a `message` body with `content` blocks (`text`, then one `tool_use` per scripted tool call,
  `input` being the parsed arguments), `stop_reason` and `usage`. Usage counts as Anthropic
  documents them: `input_tokens` are the input tokens NOT read from or written to the cache, so
  a script's `prompt_tokens` (OpenAI's total) is split into `input_tokens`,
  `cache_read_input_tokens` (`cached_tokens`) and `cache_creation_input_tokens`
  (`cache_creation_tokens`). Reasoning tokens (`reasoning_tokens`) are a breakdown of
  `output_tokens`, sent as `output_tokens_details.thinking_tokens` when there are any.
- a stream (`"stream": true`) of server-sent events with `event:` lines: `message_start` (usage
  so far), `ping`, per block `content_block_start` / `content_block_delta` (`text_delta`;
  `input_json_delta` whose `partial_json` pieces join to the arguments) / `content_block_stop`,
  then `message_delta` (`stop_reason`, `usage.output_tokens`) and `message_stop`. A stream cut
  by `StreamPlan.cut_after` ends with an `error` event (`overloaded_error`), as Anthropic's do.
- errors `{"type": "error", "error": {"type", "message"}, "request_id"}` with Anthropic's
  statuses (400, 401, 402, 403, 404, 413, 429, 500, 504, 529; others are `api_error`).

Scripts stay OpenAI-shaped. Finish reasons map stop/length/tool_calls/content_filter to
end_turn/max_tokens/tool_use/refusal; a scripted refusal is the text of an answer whose
`stop_reason` is `refusal`. Tool-call ids are sent as scripted (script `toolu_…` ids to look
like Anthropic's). Arguments that are not a JSON object are sent as `input: {}` in a message,
and as their raw text in `partial_json` pieces in a stream (what a model emitting bad JSON does).
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from tests.fakes.model_stream import ARGUMENT_PIECES, StreamPlan, arguments_object, open_stream, pieces

if TYPE_CHECKING:
    from tests.fakes.model_api import Scripted

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}

ERRORS = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API."),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out."),
    529: ("overloaded_error", "Overloaded"),
}


def error_body(status: int, message: str, number: int) -> dict[str, Any]:
    kind, default = ERRORS.get(status, ("api_error", f"error {status}"))
    return {
        "type": "error",
        "error": {"type": kind, "message": message or default},
        "request_id": f"req_fake{number}",
    }


def stop_reason(entry: Scripted) -> str:
    if entry.finish_reason:
        return STOP_REASONS.get(entry.finish_reason, entry.finish_reason)
    return "tool_use" if entry.tool_calls else "refusal" if entry.refusal else "end_turn"


def usage(entry: Scripted) -> dict[str, Any]:
    cached, created = entry.cached_tokens, entry.cache_creation_tokens
    return {
        "input_tokens": max(0, entry.prompt_tokens - cached - created),
        "output_tokens": entry.completion_tokens,
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": cached,
        "service_tier": "standard",
        **_thinking(entry),
    }


def _thinking(entry: Scripted) -> dict[str, Any]:
    return (
        {"output_tokens_details": {"thinking_tokens": entry.reasoning_tokens}}
        if entry.reasoning_tokens
        else {}
    )


def message(entry: Scripted, model: str, number: int) -> dict[str, Any]:
    """The non-streamed answer: an Anthropic `message` object."""
    text = entry.refusal if entry.refusal is not None else entry.content
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in entry.tool_calls:
        function = call["function"]
        block = {"type": "tool_use", "id": call["id"], "name": function["name"]}
        blocks.append({**block, "input": arguments_object(function["arguments"])})
    return {
        "id": f"msg_fake{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason(entry),
        "stop_sequence": None,
        "usage": usage(entry),
    }


def send_stream(
    handler: BaseHTTPRequestHandler, entry: Scripted, answer: dict[str, Any], plan: StreamPlan
) -> list[float]:
    """Write `answer` (from `message`) as Anthropic's stream events; when the text pieces left."""
    open_stream(handler, "text/event-stream")
    sent: list[float] = []

    def event(kind: str, **data: Any) -> None:
        handler.wfile.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())
        handler.wfile.flush()

    so_far = {key: value for key, value in answer["usage"].items() if key != "output_tokens_details"}
    started = {**answer, "content": [], "stop_reason": None, "usage": {**so_far, "output_tokens": 1}}
    raw = iter([call["function"]["arguments"] for call in entry.tool_calls])
    try:
        event("message_start", message=started)
        event("ping")
        for index, block in enumerate(answer["content"]):
            if block["type"] == "text":
                event("content_block_start", index=index, content_block={"type": "text", "text": ""})
                size = max(1, plan.chunk_chars)
                for number, start in enumerate(range(0, len(block["text"]), size)):
                    if plan.cut_after is not None and number >= plan.cut_after:
                        event("error", error={"type": "overloaded_error", "message": "Overloaded"})
                        return sent
                    if plan.chunk_delay and number:
                        time.sleep(plan.chunk_delay)
                    delta = {"type": "text_delta", "text": block["text"][start : start + size]}
                    event("content_block_delta", index=index, delta=delta)
                    sent.append(time.monotonic())
            else:
                event("content_block_start", index=index, content_block={**block, "input": {}})
                for piece in ["", *pieces(next(raw), ARGUMENT_PIECES)]:
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    event("content_block_delta", index=index, delta=delta)
            event("content_block_stop", index=index)
        closing = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
        event(
            "message_delta",
            delta=closing,
            usage={"output_tokens": entry.completion_tokens, **_thinking(entry)},
        )
        event("message_stop")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up
    return sent
