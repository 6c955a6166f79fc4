"""A local stand-in for a model provider's chat API, for tests, in three wire formats.

A real HTTP server on 127.0.0.1 (stdlib `ThreadingHTTPServer`, in its own thread); the request
path chooses the wire, each built from its provider's published API reference:

- OpenAI Chat Completions at `POST /v1/chat/completions` (and `/chat/completions`), bodies,
  errors and streams in `model_stream`: point LiteLLM's `openai/` models at `base_url`;
- Anthropic Messages at `POST /v1/messages` (`wire_anthropic`): LiteLLM's `anthropic/` models
  with `api_base=root_url`;
- Ollama chat at `POST /api/chat` (`wire_ollama`): LiteLLM's `ollama_chat/` models with
  `api_base=root_url`.

Answers come from one script (a queue, consumed in order whatever the wire; an entry may be
bound to one model, as sent in the body, so fallbacks can be scripted per model); with the
script empty it answers "ok". Entries are OpenAI-shaped (`tool_call` dicts, OpenAI finish
reasons, `prompt_tokens` counting cached ones) and each wire renders what it can express.
Every request is recorded with its path, headers and JSON body; `Recorded` reads the offered
tools, tool results, system text and structured-output request whatever the wire.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes import model_stream, wire_anthropic, wire_ollama
from tests.fakes.model_stream import StreamPlan

WIRES = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/api/chat": "ollama",
}
PATHS = tuple(WIRES)
JSON_TOOL = "json_tool_call"  # LiteLLM's forced tool standing for `response_format` on Anthropic


def _text(content: Any) -> str:
    """The text of a message's or block's content: a string, or a list of text parts."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


@dataclass
class Recorded:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def wire(self) -> str:
        """The API the request was written for: "openai", "anthropic" or "ollama"."""
        return WIRES.get(self.path, "openai")

    def _messages(self) -> list[dict[str, Any]]:
        return [m for m in self.body.get("messages") or [] if isinstance(m, dict)]

    def offered_tools(self) -> list[str]:
        """The names of the tools the request offered, as sent (on Anthropic, LiteLLM's
        `json_tool_call` stands for a `response_format` and is listed too)."""
        return list(self.offered_schemas())

    def offered_schemas(self) -> dict[str, Any]:
        """Each offered tool's parameter schema as sent, by name, whatever the wire."""
        tools = self.body.get("tools") or []
        if self.wire == "anthropic":
            return {tool["name"]: tool.get("input_schema") for tool in tools}
        return {
            tool["function"]["name"]: tool["function"].get("parameters")
            for tool in tools
            if "function" in tool
        }

    def tool_results(self) -> list[tuple[str, str]]:
        """(tool call id, or the tool's name where the wire has no id; content) of the tool results."""
        if self.wire == "anthropic":
            blocks = [b for m in self._messages() if isinstance(m.get("content"), list) for b in m["content"]]
            return [
                (b["tool_use_id"], _text(b.get("content"))) for b in blocks if b.get("type") == "tool_result"
            ]
        return [
            (str(m.get("tool_call_id") or m.get("tool_name") or m.get("name") or ""), _text(m.get("content")))
            for m in self._messages()
            if m.get("role") == "tool"
        ]

    def system_text(self) -> str:
        """The system prompt: Anthropic's top-level `system`, else the system messages, joined."""
        if self.wire == "anthropic":
            return _text(self.body.get("system"))
        return "\n".join(_text(m.get("content")) for m in self._messages() if m.get("role") == "system")

    def response_format(self) -> Any:
        """What the request asked for as structured output, as sent, or None: OpenAI's
        `response_format`; Ollama's `format`; on Anthropic `output_format` (or
        `output_config.format`), else LiteLLM's forced `json_tool_call` tool (its definition)."""
        if self.wire == "openai":
            return self.body.get("response_format")
        if self.wire == "ollama":
            return self.body.get("format")
        native = self.body.get("output_format") or (self.body.get("output_config") or {}).get("format")
        if native is not None:
            return native
        forced = self.body.get("tool_choice") or {}
        if forced.get("type") == "tool" and forced.get("name") == JSON_TOOL:
            return next((t for t in self.body.get("tools") or [] if t.get("name") == JSON_TOOL), None)
        return None


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
    cached_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache
    cache_creation_tokens: int = 0  # of prompt_tokens, written to it (Anthropic reports these)
    reasoning_tokens: int = 0  # of completion_tokens (OpenAI reports these)
    refusal: str | None = None  # the model declines: replaces the content


def tool_call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """A tool call as OpenAI returns it (arguments are JSON text)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


class FakeModelAPI:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._script: list[Scripted] = []
        # Answers chosen from the request itself (concurrent tasks), before the script.
        self.responder: Callable[[Recorded], Scripted | None] | None = None
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

    @property
    def root_url(self) -> str:
        """The `api_base` for LiteLLM's `anthropic/` (adds /v1/messages) and `ollama_chat/` (/api/chat)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeModelAPI:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        serve = self._server.serve_forever
        self._thread = threading.Thread(target=serve, kwargs={"poll_interval": 0.05}, daemon=True)
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
        """Answer the next `times` requests with an error of `status`, in the request's wire."""
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

    def respond(self, recorded: Recorded) -> tuple[int, dict[str, Any], Scripted]:
        """The status and body to answer `recorded` with, and the script entry they came from."""
        with self._lock:
            self.requests.append(recorded)
        chosen = self.responder(recorded) if self.responder is not None else None
        entry = chosen or self._next(recorded.model)
        if entry.status != 200:
            return entry.status, self.error_body(entry, recorded), entry
        if recorded.wire == "anthropic":
            payload = wire_anthropic.message(entry, recorded.model, next(self._ids))
        elif recorded.wire == "ollama":
            payload = wire_ollama.chat(entry, recorded.model)
        else:
            payload = self._completion(entry, recorded)
        return 200, payload, entry

    def error_body(self, entry: Scripted, recorded: Recorded) -> dict[str, Any]:
        if recorded.wire == "anthropic":
            return wire_anthropic.error_body(entry.status, entry.message, next(self._ids))
        if recorded.wire == "ollama":
            return wire_ollama.error_body(entry.status, entry.message, recorded.model)
        key = recorded.headers.get("authorization", "").removeprefix("Bearer ")
        return model_stream.error_body(entry.status, entry.message, key)

    def _completion(self, entry: Scripted, recorded: Recorded) -> dict[str, Any]:
        return model_stream.completion(entry, recorded.model, next(self._ids))


def _handler_for(api: FakeModelAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            if path not in WIRES:
                failure = {"message": f"no route {path}", "type": "invalid_request_error"}
                self._send(404, {}, {"error": {**failure, "param": None, "code": None}})
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                bad = Recorded(path, headers, {})
                self._send(400, {}, api.error_body(Scripted(status=400, message="body is not JSON"), bad))
                return
            recorded = Recorded(path, headers, body)
            status, payload, entry = api.respond(recorded)
            if entry.delay:
                time.sleep(entry.delay)
            wire = recorded.wire
            if status == 200 and body.get("stream", wire == "ollama"):  # Ollama streams by default
                plan = entry.stream or StreamPlan()
                if wire == "anthropic":
                    sent = wire_anthropic.send_stream(self, entry, payload, plan)
                elif wire == "ollama":
                    sent = wire_ollama.send_stream(self, payload, plan)
                else:
                    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    sent = model_stream.send_stream(self, payload, plan, include_usage)
                api.streamed_at.append(sent)
                return
            self._send(status, entry.headers, payload)

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
