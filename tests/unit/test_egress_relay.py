"""What the proxies pass on after the handshake: bytes a client sends together with its request
head (a POST body, a tunnel's first bytes) reach the server, a client that half-closes still
gets its answer, and a large transfer to a slow reader arrives whole."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator

import pytest

from activities.loops.egress.session import EgressSession

BIG = os.urandom(256 * 1024) * 32  # 8 MB


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    """Answers with the digest of the body it was sent (Content-Length), or with BIG for /big."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if b" /big " in head:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BIG) + BIG)
        else:
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            digest = hashlib.sha256(await reader.readexactly(length)).hexdigest().encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(digest), digest))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


def _post(target: str, body: bytes) -> bytes:
    return f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


async def test_a_body_sent_with_the_head_reaches_the_server_and_is_counted(echo: int) -> None:
    body = os.urandom(100_000)
    async with EgressSession([f"127.0.0.1:{echo}"]) as session:
        assert session.folder is not None
        reader, writer = await asyncio.open_unix_connection(str(session.folder / "http.sock"))
        writer.write(_post(f"http://127.0.0.1:{echo}/upload", body))  # head and body in one write
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        # A tunnel whose first bytes follow CONNECT without waiting for the 200.
        reader, writer = await asyncio.open_unix_connection(str(session.folder / "http.sock"))
        writer.write(f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\n\r\n".encode() + _post("/up", body))
        writer.write_eof()  # and then half-closes: the answer must still come back
        tunnelled = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        report = session.report()
    digest = hashlib.sha256(body).hexdigest().encode()
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(digest)
    assert tunnelled.startswith(b"HTTP/1.1 200 Connection established") and tunnelled.endswith(digest)
    [flow] = report.allowed
    assert flow.connections == 2 and flow.bytes_out > 2 * len(body)


async def test_a_large_answer_reaches_a_slow_reader_whole(echo: int) -> None:
    async with EgressSession([f"127.0.0.1:{echo}"]) as session:
        assert session.folder is not None
        reader, writer = await asyncio.open_unix_connection(str(session.folder / "socks.sock"))
        writer.write(bytes([5, 1, 0]) + bytes([5, 1, 0, 1, 127, 0, 0, 1]) + echo.to_bytes(2, "big"))
        assert await reader.readexactly(12) == bytes([5, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0])
        writer.write(b"GET /big HTTP/1.1\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        received = bytearray()
        while len(received) < len(BIG):
            received += await asyncio.wait_for(reader.read(64 * 1024), 10)
            await asyncio.sleep(0.001)  # slower than the server: the proxy must hold back, not drop
        writer.close()
        report = session.report()
    assert head.startswith(b"HTTP/1.1 200 OK") and bytes(received) == BIG
    assert report.allowed[0].bytes_in > len(BIG)
