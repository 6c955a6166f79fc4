"""A local stand-in for an OpenAI-compatible Chat Completions API, for tests.

A real HTTP server on 127.0.0.1 (stdlib `ThreadingHTTPServer`, in its own thread) that
answers `POST /v1/chat/completions` (and `/chat/completions`) in OpenAI's wire format:
`chat.completion` bodies with `choices[].message.tool_calls` and `usage`, and OpenAI's error
shape `{"error": {"message", "type", "code"}}` with the real status codes (429 with a
Retry-After header, 500, 401, 400). LiteLLM's real client talks to it through `api_base`.

Answers come from a script (a queue, consumed in order; an entry may be bound to one model
so fallbacks can be scripted per model); with the script empty it answers "ok". Every
request is recorded with its path, headers and JSON body. Like some OpenAI-compatible
servers, the 401 message echoes the API key it was given, so tests can check that the key
never travels further in an error.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.model_stream import StreamPlan, send_stream

PATHS = ("/v1/chat/completions", "/chat/completions")

_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    503: ("server_error", "overloaded"),
}


@dataclass
class Recorded:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))


@dataclass
class Scripted:
    """One scripted answer: a completion (status 200) or an error."""

    status: int = 200
    content: str | None = "ok"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None  # default: "tool_calls" with tool calls, else "stop"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    message: str = ""  # error message
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering
    model: str | None = None  # only answer requests for this model (as sent, e.g. "gpt-4o")
    stream: StreamPlan | None = None  # how to stream it when the request asks (default pieces)


def tool_call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """A tool call as OpenAI returns it (arguments are JSON text)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


class FakeModelAPI:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._script: list[Scripted] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.streamed_at: list[list[float]] = []  # per streamed answer: when each piece left

    # Lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What `OPENLOOP_MODEL_API_BASE` should be: the OpenAI SDK appends /chat/completions."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeModelAPI:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # Scripting ---------------------------------------------------------------------------

    def answer(self, content: str | None = "ok", **kwargs: Any) -> None:
        self._push(Scripted(content=content, **kwargs))

    def answer_tool_calls(
        self, calls: list[dict[str, Any]], content: str | None = None, **kwargs: Any
    ) -> None:
        self._push(Scripted(content=content, tool_calls=calls, **kwargs))

    def fail(
        self,
        status: int,
        times: int = 1,
        *,
        retry_after: float | None = None,
        message: str = "",
        model: str | None = None,
        delay: float = 0.0,
    ) -> None:
        """Answer the next `times` requests with an OpenAI error of `status`."""
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        for _ in range(times):
            self._push(Scripted(status=status, message=message, headers=headers, model=model, delay=delay))

    def _push(self, entry: Scripted) -> None:
        with self._lock:
            self._script.append(entry)

    def _next(self, model: str) -> Scripted:
        with self._lock:
            for index, entry in enumerate(self._script):
                if entry.model is None or entry.model == model:
                    return self._script.pop(index)
        return Scripted()

    # Answers -----------------------------------------------------------------------------

    def respond(self, recorded: Recorded) -> tuple[int, dict[str, str], dict[str, Any], float]:
        with self._lock:
            self.requests.append(recorded)
        entry = self._next(recorded.model)
        if entry.status != 200:
            return entry.status, entry.headers, self._error(entry, recorded), entry.delay
        completion = self._completion(entry, recorded)
        if entry.stream is not None:
            completion["_stream"] = entry.stream
        return 200, entry.headers, completion, entry.delay

    def _error(self, entry: Scripted, recorded: Recorded) -> dict[str, Any]:
        kind, code = _ERRORS.get(entry.status, ("server_error", "error"))
        message = entry.message
        if not message and entry.status == 401:
            key = recorded.headers.get("authorization", "").removeprefix("Bearer ")
            message = f"Incorrect API key provided: {key}. You can find your API key in your account."
        return {
            "error": {
                "message": message or f"error {entry.status}",
                "type": kind,
                "param": None,
                "code": code,
            }
        }

    def _completion(self, entry: Scripted, recorded: Recorded) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": entry.content, "refusal": None}
        if entry.tool_calls:
            message["tool_calls"] = entry.tool_calls
        finish = entry.finish_reason or ("tool_calls" if entry.tool_calls else "stop")
        return {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": recorded.model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": entry.prompt_tokens,
                "completion_tokens": entry.completion_tokens,
                "total_tokens": entry.prompt_tokens + entry.completion_tokens,
            },
        }


def _handler_for(api: FakeModelAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            if path not in PATHS:
                self._send(
                    404,
                    {},
                    {
                        "error": {
                            "message": f"no route {path}",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": None,
                        }
                    },
                )
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send(
                    400,
                    {},
                    {
                        "error": {
                            "message": "body is not JSON",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": None,
                        }
                    },
                )
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            status, extra, payload, delay = api.respond(Recorded(path, headers, body))
            if delay:
                time.sleep(delay)
            plan = payload.pop("_stream", None)
            if status == 200 and body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                api.streamed_at.append(send_stream(self, payload, plan or StreamPlan(), include_usage))
                return
            self._send(status, extra, payload)

        def _send(self, status: int, headers: dict[str, str], payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return  # keep test output quiet

    return Handler
