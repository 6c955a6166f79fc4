"""One command's egress proxies, spoken to over their Unix sockets as the bridge inside the
sandbox would: HTTP forwarding, CONNECT tunnels and SOCKS5 reach an allowed local server;
refused destinations get a refusal in the protocol's own words and land in the report."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from activities.loops import bwrap
from activities.loops.egress.session import EgressSession
from workflows.egress_report import egress_lines
from workflows.loop_types import Limits, Sandbox

BODY = b"hello from the allowed host\n"


@pytest.fixture
async def origin() -> AsyncIterator[int]:
    """A tiny HTTP server on 127.0.0.1 answering every request with BODY, then closing."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ")[1]
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Path: %s\r\n\r\n" % (len(BODY), path) + BODY
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def _exchange(path: str, request: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(request)
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def test_http_forwarding_and_connect_reach_an_allowed_host_and_are_counted(origin: int) -> None:
    async with EgressSession([f"127.0.0.1:{origin}"]) as session:
        assert session.folder is not None
        http = str(session.folder / "http.sock")
        plain = await _exchange(
            http,
            f"GET http://127.0.0.1:{origin}/simple/?q=1 HTTP/1.1\r\nHost: x\r\n"
            "Proxy-Connection: keep-alive\r\n\r\n".encode(),
        )
        assert plain.startswith(b"HTTP/1.1 200 OK") and plain.endswith(BODY)
        assert b"X-Path: /simple/?q=1" in plain  # sent on in origin form
        reader, writer = await asyncio.open_unix_connection(http)
        writer.write(f"CONNECT 127.0.0.1:{origin} HTTP/1.1\r\n\r\n".encode())
        assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 200 Connection established\r\n\r\n"
        writer.write(b"GET /tunnelled HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await asyncio.wait_for(reader.read(), 10)).endswith(BODY)
        writer.close()
        report = session.report()
    [allowed] = report.allowed
    assert (allowed.host, allowed.port, allowed.connections) == ("127.0.0.1", origin, 2)
    assert allowed.bytes_in > 2 * len(BODY) and allowed.bytes_out > 0
    assert report.blocked == [] and report.allowlist == [f"127.0.0.1:{origin}"]


async def test_a_refused_destination_gets_a_403_naming_why_and_is_reported(origin: int) -> None:
    async with EgressSession([f"127.0.0.1:{origin}"]) as session:
        assert session.folder is not None
        http = str(session.folder / "http.sock")
        for _ in range(3):
            refused = await _exchange(http, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 403 Forbidden")
        assert (
            b"blocked by the sandbox's egress allowlist: evil.example:443 (not in the allowlist)" in refused
        )
        wrong_port = await _exchange(http, f"GET http://127.0.0.1:{origin + 1}/ HTTP/1.1\r\n\r\n".encode())
        assert wrong_port.startswith(b"HTTP/1.1 403")
        report = session.report()
    assert egress_lines(report) == [
        "blocked: evil.example:443 ×3 (not in the allowlist)",
        f"blocked: 127.0.0.1:{origin + 1} (port {origin + 1} is not allowed for 127.0.0.1)",
    ]
    assert report.blocked[0].first_at and report.allowed == []


def _socks_request(command: int, host: str, port: int) -> bytes:
    try:
        address = ipaddress.ip_address(host)
        kind, raw = (1 if address.version == 4 else 4), address.packed
    except ValueError:
        kind, raw = 3, bytes([len(host)]) + host.encode()
    return bytes([5, 1, 0]) + bytes([5, command, 0, kind]) + raw + port.to_bytes(2, "big")


async def _socks(
    path: str, command: int, host: str, port: int
) -> tuple[int, asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(_socks_request(command, host, port))
    assert await reader.readexactly(2) == bytes([5, 0])  # no authentication
    reply = await reader.readexactly(10)
    return reply[1], reader, writer


async def test_socks5_connects_by_name_or_address_only_where_allowed(origin: int) -> None:
    async def localhost(host: str, port: int) -> list[str]:
        return {"localhost": ["127.0.0.1"], "rebind.example": ["127.0.0.1"]}[host]

    async with EgressSession([f"localhost:{origin}", f"rebind.example:{origin}"], localhost) as session:
        assert session.folder is not None
        socks = str(session.folder / "socks.sock")
        code, reader, writer = await _socks(socks, 1, "localhost", origin)
        assert code == 0
        writer.write(b"GET /socks HTTP/1.1\r\n\r\n")
        assert (await asyncio.wait_for(reader.read(), 10)).endswith(BODY)
        writer.close()
        # The address behind an allowed name, without the name; a listed name resolving to loopback;
        # a command other than CONNECT.
        assert (await _socks(socks, 1, "127.0.0.1", origin))[0] == 2
        assert (await _socks(socks, 1, "rebind.example", origin))[0] == 2
        assert (await _socks(socks, 3, "localhost", origin))[0] == 7
        report = session.report()
    reasons = {(b.host, b.reason) for b in report.blocked}
    assert reasons == {
        ("127.0.0.1", "not in the allowlist: an address is allowed only when listed itself"),
        ("rebind.example", "resolves to 127.0.0.1, a private address that is not listed"),
        ("localhost", "SOCKS UDP ASSOCIATE is not allowed: only CONNECT"),
    }
    assert [(a.host, a.connections) for a in report.allowed] == [("localhost", 1)]


async def test_the_sockets_go_when_the_session_ends() -> None:
    async with EgressSession(["pypi.org"]) as session:
        assert session.folder is not None and (session.folder / "socks.sock").exists()
        mount = session.mount()
    assert not session.folder.exists()
    assert (
        mount.env["HTTPS_PROXY"] == "http://127.0.0.1:3128"
        and mount.env["ALL_PROXY"] == "socks5h://127.0.0.1:1080"
    )
    assert mount.env["NO_PROXY"] == "" and mount.prefix[-1] == "--"


@pytest.mark.parametrize("root", [True, False], ids=["root-worker", "user-worker"])
async def test_with_an_allowlist_the_command_keeps_an_empty_network_namespace(
    root: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bwrap, "as_root", lambda: root)
    sandbox = Sandbox(network=["pypi.org"])
    async with EgressSession(["pypi.org"]) as session:
        mount, folder = session.mount(), str(session.folder)
    env = {"HTTP_PROXY": "http://elsewhere"}
    argv = bwrap.bwrap_argv("pip install x", tmp_path, env, Limits(), sandbox, None, mount)
    assert "--share-net" not in argv
    assert ("--unshare-net" in argv) if root else ("--unshare-all" in argv)
    at = argv.index(folder)
    assert argv[at - 1 : at + 2] == ["--ro-bind", folder, "/run/openloop-egress"]
    env = {argv[i + 1]: argv[i + 2] for i, flag in enumerate(argv) if flag == "--setenv"}
    assert env["HTTP_PROXY"] == "http://127.0.0.1:3128"  # the loop's own value cannot point elsewhere
    assert argv[-10:] == [
        "-I", "-S", "/run/openloop-egress/bridge.py",
        "/run/openloop-egress/handoff.sock", "http=3128", "socks=1080", "--",
        "/bin/sh", "-c", "pip install x",
    ]  # fmt: skip
    shared = bwrap.bwrap_argv("true", tmp_path, {}, Limits(), Sandbox(network=True))
    assert ("--unshare-net" not in shared) if root else ("--share-net" in shared)
