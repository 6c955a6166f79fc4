"""Egress by allowlist with real bubblewrap and the real proxies: a command in its own empty
network namespace reaches listed hosts (local HTTP servers on 127.0.0.x standing in for the
outside) only through the worker's proxies, and everything else it tries is refused and
reported — other hosts, the bare address of an allowed name, a listed name that resolves to
loopback, direct connections, DNS and UDP."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from activities.loops.egress import allowlist
from activities.loops.sandbox import RunOutcome, SandboxRun, run_sandboxed
from workflows.egress_report import egress_lines
from workflows.loop_types import Limits, Outcome, Sandbox

QUICK = Limits(command_timeout_s=60, stall_timeout_s=30)

# Run inside the sandbox by the worker's Python: one line of verdict per probe.
PROBE = """\
import os, socket, sys, urllib.request

def attempt(name, action):
    try:
        print(name, "OK", action())
    except Exception as error:
        print(name, "FAILED", type(error).__name__, str(error).replace("\\n", " ")[:160])

def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode().strip()

def direct(port):
    socket.create_connection(("127.0.0.2", port), timeout=3).close()
    return "connected"

def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("1.1.1.1", 53))
    return "sent"

a, b = int(sys.argv[1]), int(sys.argv[2])
print("proxy", os.environ["HTTP_PROXY"], os.environ["ALL_PROXY"], repr(os.environ["NO_PROXY"]))
attempt("allowed", lambda: fetch(f"http://127.0.0.2:{a}/allowed"))
attempt("by-name", lambda: fetch(f"http://localhost:{b}/by-name"))
attempt("literal", lambda: fetch(f"http://127.0.0.1:{b}/literal"))
attempt("other-host", lambda: fetch("http://evil.example/"))
attempt("rebind", lambda: fetch(f"http://rebind.example:{b}/"))
attempt("direct", lambda: direct(a))
attempt("public", lambda: socket.create_connection(("1.1.1.1", 80), timeout=3))
attempt("dns", lambda: socket.getaddrinfo("pypi.org", 443))
attempt("udp", udp)
"""


@pytest.fixture
async def origins() -> AsyncIterator[tuple[int, int, list[str]]]:
    """HTTP servers on the host's 127.0.0.2 and 127.0.0.1, answering `hello <path>`; the paths seen."""
    seen: list[str] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()  # a probe that connected and left
            return
        path = head.split(b" ")[1].decode()
        seen.append(path)
        body = f"hello {path}".encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        writer.close()

    first = await asyncio.start_server(answer, "127.0.0.2", 0)
    second = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with first, second:
        yield first.sockets[0].getsockname()[1], second.sockets[0].getsockname()[1], seen


async def _run(
    tmp_path: Path, command: str, network: list[str], files: dict[str, str] | None = None
) -> RunOutcome:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        (workspace / name).write_text(text)
    sandbox = Sandbox(network=network)
    return await run_sandboxed(SandboxRun(command, workspace, {}, QUICK, sandbox, tmp_path / "command.log"))


async def test_only_listed_hosts_answer_and_every_other_way_out_is_refused_and_reported(
    tmp_path: Path, origins: tuple[int, int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, seen = origins
    real_resolve = allowlist.resolve

    async def rebinding(host: str, port: int) -> list[str]:  # a DNS answering loopback for a listed name
        return ["127.0.0.1"] if host == "rebind.example" else await real_resolve(host, port)

    monkeypatch.setattr(allowlist, "resolve", rebinding)
    # 127.0.0.1 is not listed itself: only `localhost` reaches it, not its literal nor another name.
    network = [f"127.0.0.2:{a}", f"localhost:{b}", f"rebind.example:{b}"]
    ended = await _run(tmp_path, f"python probe.py {a} {b}", network, {"probe.py": PROBE})

    assert ended.outcome is Outcome.PASSED and ended.sandboxed, ended.tail
    said = {line.split(" ", 1)[0]: line for line in ended.tail.splitlines()}
    assert said["proxy"] == "proxy http://127.0.0.1:3128 socks5h://127.0.0.1:1080 ''"
    assert said["allowed"] == "allowed OK hello /allowed"
    assert said["by-name"] == "by-name OK hello /by-name"
    for refused in ("literal", "other-host", "rebind"):
        assert said[refused].startswith(f"{refused} FAILED HTTPError HTTP Error 403: Forbidden"), said[
            refused
        ]
    assert said["direct"].startswith(
        "direct FAILED ConnectionRefusedError"
    )  # its own loopback: nothing there
    assert said["public"].startswith("public FAILED OSError [Errno 101] Network is unreachable")
    assert said["dns"].startswith("dns FAILED gaierror")
    assert said["udp"].startswith("udp FAILED OSError [Errno 101] Network is unreachable")
    assert sorted(seen) == ["/allowed", "/by-name"]  # nothing else reached the outside

    assert ended.egress is not None and ended.egress.allowlist == network
    assert {(b_.host, b_.port, b_.reason) for b_ in ended.egress.blocked} == {
        ("127.0.0.1", b, "not in the allowlist: an address is allowed only when listed itself"),
        ("evil.example", 80, "not in the allowlist"),
        ("rebind.example", b, "resolves to 127.0.0.1, a private address that is not listed"),
    }
    assert {(flow.host, flow.connections) for flow in ended.egress.allowed} == {
        ("127.0.0.2", 1),
        ("localhost", 1),
    }
    assert all(flow.bytes_in > 0 and flow.bytes_out > 0 for flow in ended.egress.allowed)
    assert "blocked: evil.example:80 (not in the allowlist)" in egress_lines(ended.egress)


async def test_curl_reaches_an_allowed_host_through_connect_and_socks5(
    tmp_path: Path, origins: tuple[int, int, list[str]]
) -> None:
    a, _, seen = origins
    command = textwrap.dedent(f"""\
        set -e
        curl -sS --proxytunnel http://127.0.0.2:{a}/tunnel; echo
        curl -sS --proxy "$ALL_PROXY" http://127.0.0.2:{a}/socks; echo
        curl -sS -o /dev/null -w '%{{http_code}}\\n' https://evil.example/ || echo "https refused: $?"
        curl -sS --proxy "$ALL_PROXY" http://evil.example/ || echo "socks refused: $?"
        """)
    ended = await _run(tmp_path, command, [f"127.0.0.2:{a}"])

    assert ended.outcome is Outcome.PASSED, ended.tail
    lines = ended.tail.splitlines()
    assert "hello /tunnel" in lines and "hello /socks" in lines
    assert "https refused: 56" in lines  # CONNECT answered 403
    assert any(line.startswith("socks refused:") for line in lines)
    assert sorted(seen) == ["/socks", "/tunnel"]
    assert ended.egress is not None
    assert {(b_.host, b_.port, b_.count) for b_ in ended.egress.blocked} == {
        ("evil.example", 443, 1),
        ("evil.example", 80, 1),
    }


async def test_the_forwarder_ends_with_the_command(tmp_path: Path) -> None:
    # A command that exits at once: the sandbox must end too (the forwarder must not hold it).
    started = asyncio.get_running_loop().time()
    ended = await _run(tmp_path, "exit 7", ["pypi.org"])
    assert (ended.outcome, ended.exit_code) == (Outcome.FAILED, 7)
    assert asyncio.get_running_loop().time() - started < 10
    assert ended.egress is not None and ended.egress.blocked == [] and ended.egress.allowed == []
