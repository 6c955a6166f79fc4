"""How much any HTTP surface reads, and what a payload too large for Temporal is answered with.

`BodyLimit` wraps the whole surfaces app, so no handler can read an unbounded body: a request
whose Content-Length is over its path's limit is answered 413 before a byte of the body is
read, and one that streams more than that (chunked, or lying about its length) is cut off and
answered 413 as soon as the count passes the limit. The limit is 1 MiB everywhere (Slack's
payloads, signed hooks, dashboard forms are far smaller) except GitHub's webhook: GitHub sends
payloads of up to 25 MB and never more, so that route takes 25 MiB.

A body within the limit may still make a workflow input or signal that Temporal refuses (the
server's blob size limit, 2 MB by default and often lower in a managed cluster; its gRPC
message limit, 4 MB). Sending it again would fail the same way, so `too_large_for_temporal`
recognises those refusals and every surface answers 413 with Temporal's reason, never the
503 "send it again" it gives when Temporal is down.
"""

from __future__ import annotations

import json

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.service import RPCError, RPCStatusCode

MAX_BODY_BYTES = 1024 * 1024
GITHUB_MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub caps a webhook payload at 25 MB
BODY_LIMITS = {"/github/webhook": GITHUB_MAX_BODY_BYTES}  # exact path -> limit; else the default


def body_limit(path: str) -> int:
    return BODY_LIMITS.get(path, MAX_BODY_BYTES)


def _too_large_body(path: str, limit: int) -> bytes:
    problem = f"the request body is larger than {limit} bytes, the most {path} accepts"
    return json.dumps({"error": problem, "limit_bytes": limit}).encode()


class _BodyTooLarge(Exception):
    """Raised into the app when the body it is reading passes the limit."""


class BodyLimit:
    """ASGI middleware: every request's body bounded by `body_limit(path)` (413 past it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        limit = body_limit(path)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await _answer_413(send, path, limit)
            return
        received, over, started = 0, False, False

        async def counting_receive() -> Message:
            nonlocal received, over
            if over:
                raise _BodyTooLarge()
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    raise _BodyTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if over:  # whatever the app made of the cut-off body, the answer is the 413
                if not started:
                    started = True
                    await _answer_413(send, path, limit)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except _BodyTooLarge:
            pass
        if over and not started:
            await _answer_413(send, path, limit)


async def _answer_413(send: Send, path: str, limit: int) -> None:
    body = _too_large_body(path, limit)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def too_large_for_temporal(exc: BaseException) -> str | None:
    """Temporal's reason when it refused a call because a payload was too large; else None.

    The server answers INVALID_ARGUMENT "Blob data size exceeds limit." (also for a memo or
    search attributes "size exceeds limit"), and gRPC RESOURCE_EXHAUSTED "... larger than
    max ..." for a message past its limit; RESOURCE_EXHAUSTED alone is also rate limiting,
    which is worth retrying, so the message decides."""
    if not isinstance(exc, RPCError):
        return None
    message = exc.message or str(exc)
    if exc.status == RPCStatusCode.INVALID_ARGUMENT and "size exceeds limit" in message.lower():
        return message
    if exc.status == RPCStatusCode.RESOURCE_EXHAUSTED and "larger than max" in message.lower():
        return message
    return None


def too_large_answer(reason: str) -> JSONResponse:
    """The 413 for a request whose workflow input or signal Temporal refused as too large."""
    problem = f"what this request would start or send is too large for Temporal ({reason}); send less"
    return JSONResponse({"error": problem}, status_code=413)


async def _temporal_refusal(request: Request, exc: Exception) -> Response:
    reason = too_large_for_temporal(exc)
    if reason is None:
        raise exc
    return too_large_answer(reason)


def register(app: FastAPI) -> None:
    """Bound every body, and answer a Temporal size refusal that no handler caught with 413."""
    app.add_middleware(BodyLimit)
    app.add_exception_handler(RPCError, _temporal_refusal)
