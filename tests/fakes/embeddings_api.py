"""A local stand-in for OpenAI's embeddings API, for tests.

A real HTTP server on 127.0.0.1 answering `POST /v1/embeddings` (and `/embeddings`) in
OpenAI's wire format: a `list` of `embedding` objects with `index`, floats or base64 of
little-endian float32 (as the `encoding_format` the client asked for), `usage`, and OpenAI's
error shape with the real status codes (401, 429 with Retry-After). Vectors are a
deterministic hashing of the text at `dims` dimensions, so similar texts are near.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from activities.store.embeddings import hashing_embedding

PATHS = ("/v1/embeddings", "/embeddings")


class FakeEmbeddingsAPI:
    def __init__(self, dims: int = 8) -> None:
        self.dims = dims
        self.requests: list[dict[str, Any]] = []
        self.errors: list[tuple[int, dict[str, str]]] = []  # answered next, in order
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeEmbeddingsAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                api.requests.append(
                    {
                        "path": self.path,
                        "body": body,
                        "headers": dict(self.headers),
                        "authorization": self.headers.get("authorization"),
                    }
                )
                if self.path not in PATHS:
                    return self._send(404, {"error": {"message": "not found"}})
                if api.errors:
                    status, headers = api.errors.pop(0)
                    code = "invalid_api_key" if status == 401 else "rate_limit_exceeded"
                    error = {"message": f"error {status}", "type": "requests", "code": code}
                    return self._send(status, {"error": error}, headers)
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = []
                for index, text in enumerate(texts):
                    vector = hashing_embedding(str(text), api.dims)
                    if body.get("encoding_format") == "base64":
                        packed = struct.pack(f"<{len(vector)}f", *vector)
                        encoded: Any = base64.b64encode(packed).decode()
                    else:
                        encoded = vector
                    data.append({"object": "embedding", "index": index, "embedding": encoded})
                tokens = sum(len(str(t).split()) for t in texts)
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": body.get("model"),
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                    },
                )

            def _send(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
