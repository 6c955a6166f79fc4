"""MCP servers for the tests, written with the SDK's own server API.

    python -m tests.fakes.mcp_servers stdio STATE_DIR
    python -m tests.fakes.mcp_servers http STATE_DIR PORT

Tools: `read_note` (a read), `create_note` (a write: each call appends a line to
STATE_DIR/calls.log, so a test can count them), `slow`, `fail` (always an error result),
and `shape`, whose schema gains a field once STATE_DIR/flipped exists (looked at on every
listing and call, so a session open from before sees the change). `whoami` says whether the
HTTP request carried the Authorization header in TEST_MCP_EXPECT_AUTH (secrets come from the
environment, and never come back in a result). With TEST_MCP_REJECT_STATUS set (401 or 403),
the HTTP server answers that status, as a bearer check in front of it would, to a request that
lacks that header. Started by `start_http`, the HTTP server appends each JSON-RPC method it
is sent to STATE_DIR/methods-PORT.log (so a test can count handshakes), and keeps sessions
(Mcp-Session-Id) when asked to (`stateful`: as a server from before `server/discover`, so
clients initialise a session, and a restarted server no longer knows it).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class TestServer(MCPServer):
    """The SDK's server, with `shape` following STATE_DIR/flipped while it runs."""

    def __init__(self, state: Path) -> None:
        super().__init__("openloop-test")
        self.state, self.flipped = state, False

    def follow_flip(self) -> None:
        flipped = (self.state / "flipped").exists()
        if flipped == self.flipped:
            return
        self.flipped = flipped
        self.remove_tool("shape")
        self.add_tool(_shape_flipped if flipped else _shape, name="shape")

    async def list_tools(self) -> Any:
        self.follow_flip()
        return await super().list_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        self.follow_flip()
        return await super().call_tool(name, arguments, context)


def _shape(x: int) -> str:
    """A tool whose schema changes."""
    return str(x)


def _shape_flipped(x: int, y: int) -> str:
    """Its schema changed: it now needs y too."""
    return f"{x},{y}"


def build(state: Path) -> MCPServer:
    server = TestServer(state)

    @server.tool()
    def read_note(name: str) -> str:
        """Read a note by its name."""
        return f"The note {name!r} says: deploys happen on Tuesdays."

    @server.tool()
    def create_note(title: str, body: str = "") -> str:
        """Create a note (a side effect the tests count)."""
        with (state / "calls.log").open("a") as log:
            log.write(f"{title}\n")
        count = len((state / "calls.log").read_text().splitlines())
        return f"Created note #{count}: {title}"

    @server.tool()
    async def slow(seconds: float) -> str:
        """Take its time."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}s"

    @server.tool()
    def fail() -> str:
        """Always fails."""
        raise ValueError("the note store is read-only today")

    server.add_tool(_shape, name="shape")
    server.follow_flip()

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Whether the request carried the Authorization header this server expects."""
        request = getattr(ctx.request_context, "request", None)
        headers = getattr(request, "headers", None) or {}
        expected = os.environ.get("TEST_MCP_EXPECT_AUTH")
        return "authorized" if expected and headers.get("authorization") == expected else "unauthorized"

    return server


def bearer_check(app: ASGIApp, expected: str, status: int) -> ASGIApp:
    """`app` behind a check of the Authorization header: `status` to a request without it."""

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] != "http" or headers.get(b"authorization", b"").decode() == expected:
            await app(scope, receive, send)
            return
        body = b'{"error": "invalid_token"}'
        start = [
            (b"content-type", b"application/json"),
            (b"www-authenticate", b'Bearer error="invalid_token"'),
        ]
        await send({"type": "http.response.start", "status": status, "headers": start})
        await send({"type": "http.response.body", "body": body})

    return checked


def method_log(app: ASGIApp, log: Path, *, legacy: bool = False) -> ASGIApp:
    """`app`, appending the JSON-RPC method of each POST it is sent to `log`; `legacy`: as a
    server from before `server/discover`, which clients then initialise (with a session id)."""

    async def logged(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            request = json.loads(body)
            method = request.get("method", "(response)")
        except (ValueError, AttributeError):
            request, method = {}, "(unreadable)"
        with log.open("a") as out:
            out.write(f"{method}\n")
        if legacy and method == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            reply = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": error}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": reply})
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return logged


def serve_http(server: MCPServer, port: int) -> None:
    import uvicorn

    stateful = bool(os.environ.get("TEST_MCP_STATEFUL"))
    app: ASGIApp = server.streamable_http_app(stateless_http=not stateful)
    if os.environ.get("TEST_MCP_LOG_METHODS"):
        log = getattr(server, "state", Path(".")) / f"methods-{port}.log"
        app = method_log(app, log, legacy=stateful)
    reject = os.environ.get("TEST_MCP_REJECT_STATUS")
    if reject:
        app = bearer_check(app, os.environ.get("TEST_MCP_EXPECT_AUTH", ""), int(reject))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start_http(
    state: Path, port: int, expect_auth: str, reject_status: int | None = None, *, stateful: bool = False
) -> subprocess.Popen[bytes]:
    """The HTTP server in a process of its own, once it accepts connections on `port`."""
    env = {"TEST_MCP_EXPECT_AUTH": expect_auth, "PATH": "/usr/bin:/bin", "TEST_MCP_LOG_METHODS": "1"}
    if reject_status:
        env["TEST_MCP_REJECT_STATUS"] = str(reject_status)
    if stateful:
        env["TEST_MCP_STATEFUL"] = "1"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.mcp_servers", "http", str(state), str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    return process


def main(argv: list[str]) -> None:
    transport, state = argv[0], Path(argv[1])
    server = build(state)
    if transport == "stdio":
        server.run("stdio")
    else:
        serve_http(server, int(argv[2]))


if __name__ == "__main__":
    main(sys.argv[1:])
