"""One connection of a proxied pair, as an asyncio protocol: the command's side or the
destination's. Before `splice`, what arrives is kept for the handshake's reads (`read_until`,
`read_exactly`), at most `limit` bytes of it before reading pauses; after, it goes straight to
the other side's transport from the event loop's callback, counted, with reading paused while
the other side's write buffer is full. No task, stream or copy loop per direction: at the
proxies' size of work (a connection per request) those were most of their CPU.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

__all__ = ["Endpoint", "splice"]

HANDSHAKE_LIMIT = 64 * 1024  # kept before the handshake's reads take it; then reading pauses


class Endpoint(asyncio.Protocol):
    def __init__(self, on_made: Callable[[Endpoint], None] | None = None, limit: int = HANDSHAKE_LIMIT):
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._on_made = on_made
        self._limit = limit
        self._buffer = bytearray()
        self._eof = False
        self._lost = False
        self._full = False  # reading paused: the handshake's buffer is full
        self._waiter: asyncio.Future[None] | None = None
        self._peer: Endpoint | None = None
        self._count: Callable[[int], None] = _nothing

    # What the event loop calls.
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if self._on_made is not None:
            self._on_made(self)

    def data_received(self, data: bytes) -> None:
        if self._peer is not None:
            self._peer.write(data)
            self._count(len(data))
            return
        self._buffer += data
        if len(self._buffer) > self._limit and not self._full and self.transport is not None:
            self._full = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        if self._peer is not None:
            self._peer.write_eof()
            self._finish_if_both_ended()
        return True  # the other direction may still be talking

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = self._lost = True
        self._wake()
        if not self.closed.done():
            self.closed.set_result(None)
        if self._peer is not None:
            self._peer.close()

    def pause_writing(self) -> None:  # our write buffer is full: stop reading what fills it
        if self._peer is not None and self._peer.transport is not None:
            self._peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._peer is not None and self._peer.transport is not None:
            self._peer.transport.resume_reading()

    # What the handshake uses.
    async def read_until(self, separator: bytes) -> bytes:
        """Up to and including `separator`; IncompleteReadError at the end of the stream first,
        LimitOverrunError when more than `limit` bytes come without it."""
        while (found := self._buffer.find(separator)) < 0:
            if len(self._buffer) > self._limit:
                raise asyncio.LimitOverrunError("the handshake is too long", len(self._buffer))
            if self._eof:
                raise asyncio.IncompleteReadError(bytes(self._buffer), None)
            await self._wait()
        return self._take(found + len(separator))

    async def read_exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            if self._eof:
                raise asyncio.IncompleteReadError(bytes(self._buffer), count)
            await self._wait()
        return self._take(count)

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def write_eof(self) -> None:
        if self.transport is not None and not self.transport.is_closing() and self.transport.can_write_eof():
            self.transport.write_eof()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _take(self, count: int) -> bytes:
        chunk = bytes(self._buffer[:count])
        del self._buffer[:count]
        if self._full and len(self._buffer) <= self._limit and self.transport is not None:
            self._full = False
            self.transport.resume_reading()
        return chunk

    async def _wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _finish_if_both_ended(self) -> None:
        if self._peer is not None and self._eof and self._peer._eof:
            self.close()
            self._peer.close()


Counter = Callable[[int], None]


def splice(client: Endpoint, upstream: Endpoint, out: Counter, back: Counter) -> None:
    """From now on each side's bytes go to the other as they arrive, `out(n)` and `back(n)`
    counting them; what either kept during the handshake goes first."""
    client._peer, upstream._peer = upstream, client
    client._count, upstream._count = out, back
    for side in (client, upstream):
        if side._buffer:
            side._peer.write(bytes(side._buffer))  # type: ignore[union-attr]
            side._count(len(side._buffer))
            side._buffer.clear()
        if side._full and side.transport is not None:
            side._full = False
            side.transport.resume_reading()
    for side in (client, upstream):
        if side._lost:
            upstream.close() if side is client else client.close()
        elif side._eof:
            side.eof_received()


def _nothing(count: int) -> None:
    pass
