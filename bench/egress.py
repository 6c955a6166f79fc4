"""Egress by allowlist: what the per-command proxies cost. `python -m bench egress [--quick]`
(about a minute; no Temporal or Postgres: only bubblewrap, the proxies and a local server).

1. Requests: one sandboxed command makes `requests` HTTP requests (a new connection each) to a
   server on the host's 127.0.0.1, timed inside the command: with `network: true` (direct), and
   with `network: [127.0.0.1:PORT]` through the proxy as plain forwarding and as CONNECT tunnels
   (what HTTPS uses; TLS would add the same cost to both sides, so plain HTTP is the worst
   case for the ratio). Alternated, `repeats` times each; medians.
2. Start cost: `true` with an allowlist against `true` with `network: false`, alternated
   `starts` times: the median difference is what the proxies and the bridge add to a command.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from activities.loops.egress.session import EgressSession
from activities.loops.sandbox import SandboxRun, run_sandboxed, sandbox_problem
from bench.common import log
from bench.tables import table, verdict
from workflows.loop_types import Limits, Outcome, Sandbox

TARGET_RATIO = 1.15
TARGET_START_MS = 50.0
LIMITS = Limits(command_timeout_s=300, stall_timeout_s=120)
CLIENT = """\
import http.client, sys, time
mode, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
started = time.perf_counter()
for _ in range(count):
    if mode == "direct":
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/")
    else:
        connection = http.client.HTTPConnection("127.0.0.1", 3128, timeout=10)
        if mode == "connect":
            connection.set_tunnel("127.0.0.1", port)
            connection.request("GET", "/")
        else:
            connection.request("GET", f"http://127.0.0.1:{port}/")
    answer = connection.getresponse()
    assert answer.status == 200 and answer.read()
    connection.close()
print("elapsed", time.perf_counter() - started)
"""


@dataclass
class Sizes:
    requests: int = 200
    repeats: int = 5
    starts: int = 20

    @classmethod
    def quick(cls) -> Sizes:
        return cls(repeats=3, starts=10)


ORIGIN = """\
import asyncio
async def answer(reader, writer):
    await reader.readuntil(b"\\r\\n\\r\\n")
    writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: 3\\r\\nConnection: close\\r\\n\\r\\nok\\n")
    await writer.drain()
    writer.close()
async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


async def _origin() -> tuple[int, asyncio.subprocess.Process]:
    """A small HTTP server in a process of its own, as an outside host would be (in this
    process it would share the proxies' interpreter)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ORIGIN, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    return int(await process.stdout.readline()), process


async def _command(workspace: Path, command: str, network: bool | list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    run = SandboxRun(command, workspace, {}, LIMITS, Sandbox(network=network), workspace.parent / "log")
    ended = await run_sandboxed(run)
    if ended.outcome is not Outcome.PASSED:
        raise RuntimeError(f"{command!r} ended {ended.outcome}: {ended.reason} {ended.tail}")
    return time.perf_counter() - started, ended.tail


def _stats(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "runs": values}


async def run(sizes: Sizes) -> dict[str, Any]:
    if problem := sandbox_problem():
        raise SystemExit(f"bench egress needs bubblewrap: {problem}")
    port, origin = await _origin()
    allow = [f"127.0.0.1:{port}"]
    with tempfile.TemporaryDirectory(prefix="bench-egress-") as folder:
        workspace = Path(folder) / "workspace"
        workspace.mkdir()
        (workspace / "client.py").write_text(CLIENT)
        inside: dict[str, list[float]] = {"direct": [], "forward": [], "connect": []}
        for repeat in range(sizes.repeats):
            for mode in inside:
                network: bool | list[str] = True if mode == "direct" else allow
                _, tail = await _command(
                    workspace, f"python client.py {mode} {port} {sizes.requests}", network
                )
                inside[mode].append(round(float(tail.split()[-1]), 4))
            log(f"egress: requests, repeat {repeat + 1}/{sizes.repeats}: {[v[-1] for v in inside.values()]}")
        starts: dict[str, list[float]] = {"network_false": [], "allowlist": []}
        for _ in range(sizes.starts):
            starts["network_false"].append(round((await _command(workspace, "true", False))[0] * 1000, 2))
            starts["allowlist"].append(round((await _command(workspace, "true", allow))[0] * 1000, 2))
        sessions = []
        for _ in range(sizes.starts):
            began = time.perf_counter()
            async with EgressSession(allow):
                sessions.append(round((time.perf_counter() - began) * 1000, 2))
    origin.terminate()
    await origin.wait()
    direct = statistics.median(inside["direct"])
    ratios = {mode: round(statistics.median(v) / direct, 3) for mode, v in inside.items() if mode != "direct"}
    start_ms = round(statistics.median(starts["allowlist"]) - statistics.median(starts["network_false"]), 1)
    return {
        "sizes": asdict(sizes),
        "requests_s": {mode: _stats(values) for mode, values in inside.items()},
        "proxied_over_direct": ratios,
        "command_ms": {name: _stats(values) for name, values in starts.items()},
        "start_cost_ms": start_ms,
        "session_start_ms": _stats(sessions),
        "targets": {
            "proxied_within_1.15x": max(ratios.values()) <= TARGET_RATIO,
            "start_within_50ms": start_ms <= TARGET_START_MS,
        },
    }


def render(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    n, ratios, req = r["sizes"]["requests"], r["proxied_over_direct"], r["requests_s"]
    rows = [
        [
            f"{n} HTTP requests through the egress proxy / network: true",
            f"forwarding {ratios['forward']}x, CONNECT {ratios['connect']}x "
            f"({req['direct']['median']} s direct)",
            f"<= {TARGET_RATIO}x",
            verdict(r["targets"]["proxied_within_1.15x"]),
        ],
        [
            "proxies + bridge start cost per command",
            f"{r['start_cost_ms']} ms (session alone {r['session_start_ms']['median']} ms)",
            f"<= {TARGET_START_MS:g} ms",
            verdict(r["targets"]["start_within_50ms"]),
        ],
    ]
    detail = table(
        ["variant", "median", "min"],
        [[f"{k} (s, {n} requests)", v["median"], v["min"]] for k, v in req.items()]
        + [[f"`true`, {k} (ms)", v["median"], v["min"]] for k, v in r["command_ms"].items()],
    )
    return rows, detail
