"""The bridge's handoff, done here as the bridge does it inside the sandbox: listening sockets
sent over the session's handoff socket become the proxies' ports, once only; anything but
listening TCP sockets is refused and reported. And the proxy's lookups are remembered for a
while (and shared by connections opened at once), the allowlist's checks still applied to
what was remembered."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator

import pytest

from activities.loops.egress.allowlist import Allowlist
from activities.loops.egress.session import EgressSession

BODY = b"hello through a handed-over port\n"


@pytest.fixture
async def origin() -> AsyncIterator[int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


def _listener() -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    return listener


async def _hand_over(session: EgressSession, names: bytes, fds: list[int]) -> None:
    assert session.folder is not None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
        channel.connect(str(session.folder / "handoff.sock"))
        socket.send_fds(channel, [names], fds)
    for _ in range(100):  # the session takes them on its own event loop
        if not (session.folder / "handoff.sock").exists():
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)


async def test_handed_over_ports_are_served_by_the_proxies_and_the_handoff_happens_once(
    origin: int,
) -> None:
    http, socks = _listener(), _listener()
    port = http.getsockname()[1]
    async with EgressSession([f"127.0.0.1:{origin}"]) as session:
        await _hand_over(session, b"http socks", [http.fileno(), socks.fileno()])
        for ours in (http, socks):  # the session holds its own copies now
            ours.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"CONNECT 127.0.0.1:{origin} HTTP/1.1\r\n\r\n".encode())
        assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 200 Connection established\r\n\r\n"
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await asyncio.wait_for(reader.read(), 10)).endswith(BODY)
        writer.close()
        # A second handoff (the command trying its own sockets) finds no socket to speak to.
        assert session.folder is not None
        with pytest.raises(OSError), socket.socket(socket.AF_UNIX) as late:
            late.connect(str(session.folder / "handoff.sock"))
        report = session.report()
    [allowed] = report.allowed
    assert (allowed.port, allowed.connections) == (origin, 1) and allowed.bytes_in > len(BODY)
    with pytest.raises(ConnectionRefusedError):  # the session's end closed the ports
        await asyncio.open_connection("127.0.0.1", port)


@pytest.mark.parametrize("wrong", ["a pipe", "a connected socket", "a missing name"])
async def test_anything_but_listening_tcp_sockets_is_refused_and_reported(wrong: str) -> None:
    http, other = _listener(), _listener()
    port = http.getsockname()[1]
    read_end, write_end = os.pipe()
    peer = socket.create_connection(other.getsockname())
    second, names = {
        "a pipe": (read_end, b"http socks"),
        "a connected socket": (peer.fileno(), b"http socks"),
        "a missing name": (other.fileno(), b"http"),
    }[wrong]
    async with EgressSession(["pypi.org"]) as session:
        await _hand_over(session, names, [http.fileno(), second])
        http.close()
        with pytest.raises(ConnectionRefusedError):  # the good one was closed with the rest
            await asyncio.open_connection("127.0.0.1", port)
        report = session.report()
    for closing in (other, peer):
        closing.close()
    for end in (read_end, write_end):
        os.close(end)
    [blocked] = report.blocked
    assert blocked.reason.startswith("the sandbox's proxy ports were not handed over: ")


async def test_a_name_is_looked_up_once_a_while_and_checked_every_time() -> None:
    calls: list[str] = []

    async def lookup(host: str, port: int) -> list[str]:
        calls.append(host)
        return {"pypi.org": ["151.101.0.223"], "rebind.example": ["127.0.0.1"]}[host]

    allowlist = Allowlist(["pypi.org", "rebind.example"], lookup)
    first, again = await allowlist.check("pypi.org", 443), await allowlist.check("pypi.org", 443)
    assert first.allowed and again.addresses == first.addresses and calls == ["pypi.org"]
    for _ in range(2):  # what was remembered is refused every time, as when first looked up
        refused = await allowlist.check("rebind.example", 443)
        assert refused.reason == "resolves to 127.0.0.1, a private address that is not listed"
    assert calls == ["pypi.org", "rebind.example"]
    assert not (await allowlist.check("nowhere.example", 443)).allowed  # not listed: no lookup at all

    fresh = Allowlist(["pypi.org"], lookup, remember_s=0)
    for _ in range(2):
        await fresh.check("pypi.org", 443)
    assert calls[2:] == ["pypi.org", "pypi.org"]


async def test_connections_opened_at_once_share_one_lookup() -> None:
    calls: list[str] = []

    async def slow(host: str, port: int) -> list[str]:
        calls.append(host)
        await asyncio.sleep(0.05)
        return ["151.101.0.223"]

    allowlist = Allowlist(["pypi.org"], slow)
    verdicts = await asyncio.gather(*(allowlist.check("pypi.org", 443) for _ in range(5)))
    assert all(v.allowed for v in verdicts) and calls == ["pypi.org"]


async def test_a_failed_lookup_is_asked_again() -> None:
    answers: list[OSError | list[str]] = [OSError("temporary failure"), ["151.101.0.223"]]

    async def flaky(host: str, port: int) -> list[str]:
        answer = answers.pop(0)
        if isinstance(answer, OSError):
            raise answer
        return answer

    allowlist = Allowlist(["pypi.org"], flaky)
    assert (await allowlist.check("pypi.org", 443)).reason == "the name does not resolve"
    assert (await allowlist.check("pypi.org", 443)).allowed and answers == []
