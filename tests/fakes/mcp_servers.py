"""MCP servers for the tests, written with the SDK's own server API.

    python -m tests.fakes.mcp_servers stdio STATE_DIR
    python -m tests.fakes.mcp_servers http STATE_DIR PORT

Tools: `read_note` (a read), `create_note` (a write: each call appends a line to
STATE_DIR/calls.log, so a test can count them), `slow`, `fail` (always an error result),
and `shape`, whose schema gains a field once STATE_DIR/flipped exists (a server process
reads it when it starts: stdio starts one per connection). `whoami` says whether the HTTP
request carried the Authorization header in TEST_MCP_EXPECT_AUTH (secrets come from the
environment, and never come back in a result). With TEST_MCP_REJECT_STATUS set (401 or 403),
the HTTP server answers that status, as a bearer check in front of it would, to a request that
lacks that header.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send


def build(state: Path) -> MCPServer:
    server = MCPServer("openloop-test")

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

    if (state / "flipped").exists():

        @server.tool()
        def shape(x: int, y: int) -> str:
            """Its schema changed: it now needs y too."""
            return f"{x},{y}"

    else:

        @server.tool()
        def shape(x: int) -> str:  # noqa: F811 - one of the two is registered
            """A tool whose schema changes."""
            return str(x)

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


def serve_http(server: MCPServer, port: int) -> None:
    import uvicorn

    app: ASGIApp = server.streamable_http_app(stateless_http=True)
    reject = os.environ.get("TEST_MCP_REJECT_STATUS")
    if reject:
        app = bearer_check(app, os.environ.get("TEST_MCP_EXPECT_AUTH", ""), int(reject))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start_http(
    state: Path, port: int, expect_auth: str, reject_status: int | None = None
) -> subprocess.Popen[bytes]:
    """The HTTP server in a process of its own, once it accepts connections on `port`."""
    env = {"TEST_MCP_EXPECT_AUTH": expect_auth, "PATH": "/usr/bin:/bin"}
    if reject_status:
        env["TEST_MCP_REJECT_STATUS"] = str(reject_status)
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
