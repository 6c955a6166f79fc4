"""Streamed answers of the fake Chat Completions API (`"stream": true`), in OpenAI's wire format.

Server-sent events: one `chat.completion.chunk` per piece of the scripted content (the role
first, then `delta.content` pieces of `chunk_chars` characters, `chunk_delay` seconds apart),
the tool calls as `delta.tool_calls`, a last chunk with `finish_reason`, a usage chunk when
`stream_options.include_usage` asks for it, then `data: [DONE]`. `cut_after` ends the
stream with an error event after that many content pieces, as a provider failing mid-answer does.
`FakeModelAPI`'s handler calls `send_stream` when a scripted completion was asked to stream.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any


@dataclass
class StreamPlan:
    chunk_chars: int = 8
    chunk_delay: float = 0.0
    cut_after: int | None = None


def send_stream(
    handler: BaseHTTPRequestHandler, completion: dict[str, Any], plan: StreamPlan, include_usage: bool
) -> list[float]:
    """Write `completion` as server-sent events; the monotonic times the content pieces left."""
    handler.close_connection = True
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    sent: list[float] = []
    choice = completion["choices"][0]
    message = choice["message"]
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"

    def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        handler.wfile.flush()

    try:
        event({"role": "assistant", "content": ""})
        content = message.get("content") or ""
        size = max(1, plan.chunk_chars)
        for index, start in enumerate(range(0, len(content), size)):
            if plan.cut_after is not None and index >= plan.cut_after:
                failure = {
                    "error": {
                        "message": "The server had an error while processing your request.",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                }
                handler.wfile.write(f"data: {json.dumps(failure)}\n\n".encode())
                handler.wfile.flush()
                return sent  # the answer breaks off mid-stream, as a provider's outage does
            if plan.chunk_delay and index:
                time.sleep(plan.chunk_delay)
            event({"content": content[start : start + size]})
            sent.append(time.monotonic())
        for position, call in enumerate(message.get("tool_calls") or []):
            event({"tool_calls": [{"index": position, **call}]})
        event({}, choice["finish_reason"])
        if include_usage:
            usage_chunk = {**base, "choices": [], "usage": completion["usage"]}
            handler.wfile.write(f"data: {json.dumps(usage_chunk)}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up
    return sent
