"""Open MCP sessions kept per worker process, so a call does not connect and initialise each time.

A session is keyed by the server's address (URL or command), transport and a hash of the
credentials the worker sends it (never the secrets themselves): a changed token or a
different one gets a session of its own. Each session is held by a task of its own that
opened the transport and will close it, since the SDK's cancel scopes must be left by the
task that entered them; activities send their requests on the open session meanwhile.

At most `OPENLOOP_MCP_SESSIONS_MAX` sessions (least recently used closed first), each closed
after `OPENLOOP_MCP_SESSION_IDLE_S` unused, all closed when the worker stops. A session that
went stale (the server restarted, closed the connection, or answered 404 "session
terminated") is dropped and the request is made once more on a new one; a write is repeated
only when the server cannot have received it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from temporalio.exceptions import ApplicationError

from activities.mcp.client import _innermost, classified, connect, credentials, open_client
from activities.mcp.refusal import RefusalWatch
from activities.mcp.reuse_settings import ReuseSettings, reuse_settings
from config.mcp import McpServer
from workflows.errors import ErrorType

log = logging.getLogger(__name__)

T = TypeVar("T")
DRAIN_SECONDS = 30.0  # a closing session waits this long at most for the requests still on it
CLOSE_SECONDS = 10.0  # and this long for its transport to close


def session_key(server: McpServer) -> str:
    """Which sessions may be shared: same address, transport and credentials (hashed)."""
    secrets = json.dumps(credentials(server), sort_keys=True)
    address = server.url if server.transport != "stdio" else json.dumps(server.command)
    digest = hashlib.sha256(secrets.encode()).hexdigest()[:16]
    return f"{server.transport} {address} creds:{digest}"


class Session:
    """One open session, owned by its own task from opening to closing."""

    def __init__(self, server: McpServer, idle_seconds: float) -> None:
        self.server, self.idle_seconds = server, idle_seconds
        self.watch = RefusalWatch()
        self.in_use, self.last_used = 0, time.monotonic()
        self.ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self.ready.add_done_callback(lambda done: done.cancelled() or done.exception())  # seen, if unused
        self.closing, self.drained = asyncio.Event(), asyncio.Event()
        self.task = asyncio.create_task(self._own(), name=f"mcp-session {server.name}")

    @property
    def alive(self) -> bool:
        return not self.task.done() and not self.closing.is_set()

    async def use(self, op: Callable[[Client], Awaitable[T]]) -> T:
        self.in_use += 1  # before opening: a session is not idle while its first user waits
        try:
            client = await asyncio.shield(self.ready)
            self.watch.status = None  # a refusal seen by an earlier request is not this one's
            self.watch.session_gone = False
            return await op(client)
        finally:
            self.in_use -= 1
            self.last_used = time.monotonic()
            if self.in_use == 0:
                self.drained.set()

    def close(self) -> None:
        self.closing.set()

    async def _own(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                self.ready.set_result(await open_client(self.server, stack, self.watch))
                await self._until_closed()
        except Exception as err:  # the transport failed: the next request opens a new session
            if not self.ready.done():
                self.ready.set_exception(err)
            else:
                log.info("MCP session to %s ended: %s", self.server.name, type(_innermost(err)).__name__)
        finally:
            self.closing.set()
            if not self.ready.done():  # cancelled (the loop ending): nobody waits for ever
                self.ready.cancel()

    async def _until_closed(self) -> None:
        """Wait (without cancelling this task, whose scopes belong to the SDK) until closed or idle."""
        closing = asyncio.ensure_future(self.closing.wait())
        try:
            while not closing.done():
                left = self.idle_seconds - (time.monotonic() - self.last_used)
                if self.in_use == 0 and left <= 0:
                    self.closing.set()  # no longer offered to new requests
                    return
                await asyncio.wait({closing}, timeout=max(left, 1.0))
            if self.in_use:
                self.drained.clear()
                drained = asyncio.ensure_future(self.drained.wait())
                await asyncio.wait({drained}, timeout=DRAIN_SECONDS)
                drained.cancel()
        finally:
            closing.cancel()


class Sessions:
    """The sessions of one event loop (a worker process has one)."""

    def __init__(self, settings: ReuseSettings) -> None:
        self.settings = settings
        self.open: OrderedDict[str, Session] = OrderedDict()

    def _get(self, server: McpServer) -> tuple[str, Session, bool]:
        key = session_key(server)
        session = self.open.get(key)
        if session is not None and session.alive:
            self.open.move_to_end(key)
            return key, session, False
        session = Session(server, self.settings.session_idle_seconds)
        self.open[key] = session
        while len(self.open) > self.settings.max_sessions:
            _, oldest = self.open.popitem(last=False)
            oldest.close()
        return key, session, True

    def _drop(self, key: str, session: Session) -> None:
        if self.open.get(key) is session:
            del self.open[key]
        session.close()

    async def run(self, server: McpServer, op: Callable[[Client], Awaitable[T]], *, repeatable: bool) -> T:
        """`op` on a session to `server`; once more on a new one if the cached one went stale.
        `repeatable`: whether `op` may be sent twice (a read) or only when it cannot have arrived."""
        if self.settings.max_sessions == 0:
            async with connect(server) as client:
                return await op(client)
        key, session, fresh = self._get(server)
        try:
            return await session.use(op)
        except Exception as err:
            error = classified(server, err, session.watch)
            gone = session.watch.session_gone
            refused = isinstance(error, ApplicationError) and error.type == ErrorType.MCP_AUTH_ERROR
            if gone or refused or _broken(err):
                self._drop(key, session)
            if fresh or not (gone or _stale(err, repeatable)):
                raise error from None
            log.info("MCP server %s: its cached session went stale (%s); reconnecting", server.name, error)
        key, session, _ = self._get(server)
        try:
            return await session.use(op)
        except Exception as err:
            if session.watch.session_gone or _broken(err):
                self._drop(key, session)
            raise classified(server, err, session.watch) from None

    async def close(self) -> None:
        sessions = list(self.open.values())
        self.open.clear()
        for session in sessions:
            session.close()
        if sessions:
            await asyncio.wait([s.task for s in sessions], timeout=DRAIN_SECONDS + CLOSE_SECONDS)


def _not_sent(err: BaseException) -> bool:
    """The request cannot have reached the server: no connection, or the session's streams
    were already closed (a 404 for an unknown session is seen by the session's `watch`)."""
    inner = _innermost(err)
    return isinstance(inner, (httpx2.ConnectError, anyio.ClosedResourceError, anyio.BrokenResourceError))


def _broken(err: BaseException) -> bool:
    inner = _innermost(err)
    if isinstance(inner, MCPError):
        return inner.code == CONNECTION_CLOSED
    return isinstance(inner, (OSError, httpx2.HTTPError, anyio.EndOfStream)) or _not_sent(inner)


def _stale(err: BaseException, repeatable: bool) -> bool:
    return _not_sent(err) or (repeatable and _broken(err))


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Sessions] = weakref.WeakKeyDictionary()


def sessions() -> Sessions:
    """This event loop's sessions (a session cannot outlive the loop its task runs on)."""
    loop = asyncio.get_running_loop()
    found = _by_loop.get(loop)
    if found is None:
        found = _by_loop[loop] = Sessions(reuse_settings())
    return found


async def close_sessions() -> None:
    """Close this loop's sessions (the worker stopping; the next request would open new ones)."""
    found = _by_loop.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()
