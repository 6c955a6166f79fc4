"""The HTTP egress proxy a sandboxed command reaches over a Unix socket: `CONNECT host:port`
tunnels (HTTPS, anything over TCP) and plain `GET http://host/...` forwarding, each destination
checked by the command's `Gate` first. A refusal is a 403 whose body says why, so the
command's own output names the blocked host. Standard library only."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from activities.loops.egress.endpoint import Endpoint
from activities.loops.egress.ledger import Gate, open_checked, relay

__all__ = ["serve_http"]

HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 15.0
_HOP_HEADERS = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}


def _answer(client: Endpoint, status: str, message: str) -> None:
    body = (message + "\n").encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    client.write(head.encode() + body)
    client.close()


def _host_port(target: str, default: int) -> tuple[str, int] | None:
    parsed = urlsplit("//" + target)
    try:
        port = parsed.port or default
    except ValueError:
        return None
    return (parsed.hostname, port) if parsed.hostname else None


async def serve_http(gate: Gate, client: Endpoint) -> None:
    try:
        async with asyncio.timeout(HEAD_TIMEOUT_S):
            head = await client.read_until(b"\r\n\r\n")  # at most the endpoint's limit
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
        client.close()
        return
    request_line, *headers = head.decode("latin-1").split("\r\n")
    method, _, rest = request_line.partition(" ")
    target, _, version = rest.partition(" ")
    if method.upper() == "CONNECT":
        found, path = _host_port(target, 443), ""
    else:
        url = urlsplit(target)
        if url.scheme != "http":
            _answer(
                client, "400 Bad Request", f"send http:// URLs or CONNECT through this proxy, not {target!r}"
            )
            return
        found = _host_port(url.netloc, 80)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    if found is None:
        _answer(client, "400 Bad Request", f"no host in {target!r}")
        return
    verdict = await gate.check(*found)
    if not verdict.allowed:
        _answer(
            client,
            "403 Forbidden",
            f"blocked by the sandbox's egress allowlist: {found[0]}:{found[1]} ({verdict.reason})",
        )
        return
    try:
        upstream = await open_checked(verdict, CONNECT_TIMEOUT_S)
    except OSError as error:
        _answer(client, "502 Bad Gateway", f"could not connect to {found[0]}:{found[1]}: {error}")
        return
    flow = gate.flow(verdict)
    if path:  # plain HTTP: one request, in origin form, and the server closes after it
        kept = [
            line for line in headers if line and line.split(":", 1)[0].strip().lower() not in _HOP_HEADERS
        ]
        forwarded = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""]).encode(
            "latin-1"
        )
        upstream.write(forwarded)
        flow.bytes_out += len(forwarded)
    else:
        client.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await relay(client, upstream, flow)
