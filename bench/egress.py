"""Egress by allowlist: what the per-command proxies cost. `python -m bench egress [--quick]`
(about a minute; no Temporal or Postgres: only bubblewrap, the proxies and a local server).

1. Requests: one sandboxed command makes HTTP requests to a server on the host's 127.0.0.1,
   timed inside the command: with `network: true` (direct), and with `network:
   [127.0.0.1:PORT]` through the proxy, as plain forwarding and as CONNECT tunnels (what
   HTTPS uses; TLS would add the same cost to both sides, so plain HTTP is the worst case for
   the ratio). Three scenarios: a new connection per request answered at once (the worst
   case: the proxy's whole per-connection cost against a ~0.3 ms loopback request); one
   kept-alive connection (what pip, requests and curl do with a host: one tunnel, many
   requests); and registry-like answers (after `delay_ms`, `body_kb` long, standing in for a
   package registry's round trip), a new connection each. Alternated, `repeats` times; medians.
2. Start cost: `true` with an allowlist against `true` with `network: false`, alternated
   `starts` times: the median difference is what the proxies and the bridge add to a command.
"""

from __future__ import annotations

import asyncio
import resource
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
from bench.egress_scripts import CLIENT, ORIGIN
from bench.tables import table, verdict
from workflows.loop_types import Limits, Outcome, Sandbox

TARGET_RATIO = 1.15
TARGET_START_MS = 50.0
LIMITS = Limits(command_timeout_s=300, stall_timeout_s=120)


@dataclass
class Sizes:
    requests: int = 200
    registry_requests: int = 200
    delay_ms: int = 20
    body_kb: int = 100
    repeats: int = 5
    starts: int = 20

    @classmethod
    def quick(cls) -> Sizes:
        return cls(registry_requests=50, repeats=3, starts=10)


@dataclass(frozen=True)
class Scenario:
    modes: tuple[str, ...]  # direct first: the others are compared with it
    reuse: bool
    registry_like: bool = False

    def argv(self, sizes: Sizes) -> tuple[int, str, str]:
        path = f"/?delay_ms={sizes.delay_ms}&kb={sizes.body_kb}" if self.registry_like else "/"
        count = sizes.registry_requests if self.registry_like else sizes.requests
        return count, "reuse" if self.reuse else "new", path


SCENARIOS = {
    "new_connections": Scenario(("direct", "forward", "connect"), reuse=False),
    "keep_alive": Scenario(("direct", "connect"), reuse=True),
    "registry_like": Scenario(("direct", "connect"), reuse=False, registry_like=True),
}


async def _origin() -> tuple[int, asyncio.subprocess.Process]:
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


Figures = dict[str, dict[str, list[float]]]  # per scenario, per mode: one value a repeat


def _cpu_s() -> float:
    """This process's CPU time: the proxies run here (and the sandbox's supervision, the same
    for every mode, which the direct mode's figure takes out)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _requests(workspace: Path, port: int, sizes: Sizes) -> tuple[Figures, Figures]:
    """Seconds the client took, and this process's CPU seconds meanwhile, per scenario and
    mode, alternated within each repeat."""
    allow = [f"127.0.0.1:{port}"]
    inside: Figures = {n: {m: [] for m in s.modes} for n, s in SCENARIOS.items()}
    cpu: Figures = {n: {m: [] for m in s.modes} for n, s in SCENARIOS.items()}
    for repeat in range(sizes.repeats):
        for name, scenario in SCENARIOS.items():
            count, reuse, path = scenario.argv(sizes)
            for mode in scenario.modes:
                command = f"python client.py {mode} {port} {count} {reuse} '{path}'"
                began = _cpu_s()
                _, tail = await _command(workspace, command, True if mode == "direct" else allow)
                cpu[name][mode].append(_cpu_s() - began)
                inside[name][mode].append(round(float(tail.split()[-1]), 4))
        log(f"egress: requests, repeat {repeat + 1}/{sizes.repeats}")
    return inside, cpu


async def run(sizes: Sizes) -> dict[str, Any]:
    if problem := sandbox_problem():
        raise SystemExit(f"bench egress needs bubblewrap: {problem}")
    port, origin = await _origin()
    allow = [f"127.0.0.1:{port}"]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-egress-") as folder:
            workspace = Path(folder) / "workspace"
            workspace.mkdir()
            (workspace / "client.py").write_text(CLIENT)
            inside, cpu = await _requests(workspace, port, sizes)
            starts: dict[str, list[float]] = {"network_false": [], "allowlist": []}
            for _ in range(sizes.starts):
                for name, network in (("network_false", False), ("allowlist", allow)):
                    starts[name].append(round((await _command(workspace, "true", network))[0] * 1000, 2))
            sessions = []
            for _ in range(sizes.starts):
                began = time.perf_counter()
                async with EgressSession(allow):
                    sessions.append(round((time.perf_counter() - began) * 1000, 2))
    finally:
        origin.terminate()
        await origin.wait()
    ratios: dict[str, dict[str, float]] = {}
    extra_us: dict[str, dict[str, float]] = {}
    cpu_us: dict[str, dict[str, float]] = {}
    for name, modes in inside.items():
        direct, count = statistics.median(modes["direct"]), SCENARIOS[name].argv(sizes)[0]
        proxied = {mode: statistics.median(v) for mode, v in modes.items() if mode != "direct"}
        ratios[name] = {mode: round(s / direct, 3) for mode, s in proxied.items()}
        extra_us[name] = {mode: round((s - direct) / count * 1e6) for mode, s in proxied.items()}
        spent = {mode: statistics.median(v) for mode, v in cpu[name].items()}
        cpu_us[name] = {m: round((spent[m] - spent["direct"]) / count * 1e6) for m in proxied}
    start_ms = round(statistics.median(starts["allowlist"]) - statistics.median(starts["network_false"]), 1)
    return {
        "sizes": asdict(sizes),
        "requests_s": {name: {m: _stats(v) for m, v in modes.items()} for name, modes in inside.items()},
        "proxied_over_direct": ratios,
        "added_us_per_request": extra_us,
        "proxy_cpu_us_per_request": cpu_us,
        "command_ms": {name: _stats(values) for name, values in starts.items()},
        "start_cost_ms": start_ms,
        "session_start_ms": _stats(sessions),
        "targets": {
            **{f"{name}_within_1.15x": max(r.values()) <= TARGET_RATIO for name, r in ratios.items()},
            "start_within_50ms": start_ms <= TARGET_START_MS,
        },
    }


def render(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    sizes, ratios, req = r["sizes"], r["proxied_over_direct"], r["requests_s"]
    extra, cpu = r["added_us_per_request"], r["proxy_cpu_us_per_request"]
    titles = {
        "new_connections": f"{sizes['requests']} HTTP requests, a new connection each",
        "keep_alive": f"{sizes['requests']} HTTP requests on one kept-alive connection",
        "registry_like": f"{sizes['registry_requests']} registry-like requests "
        f"({sizes['delay_ms']} ms, {sizes['body_kb']} kB), a new connection each",
    }
    rows = [
        [
            f"egress proxy / network: true: {titles[name]}",
            ", ".join(
                f"{mode} {ratio}x (+{extra[name][mode]} us, {cpu[name][mode]} us CPU)"
                for mode, ratio in ratios[name].items()
            )
            + f"; direct {req[name]['direct']['median']} s",
            f"<= {TARGET_RATIO}x",
            verdict(r["targets"][f"{name}_within_1.15x"]),
        ]
        for name in ratios
    ]
    rows.append(
        [
            "egress proxies + bridge: start cost per command",
            f"{r['start_cost_ms']} ms (session alone {r['session_start_ms']['median']} ms)",
            f"<= {TARGET_START_MS:g} ms",
            verdict(r["targets"]["start_within_50ms"]),
        ]
    )
    detail = table(
        ["variant", "median", "min"],
        [
            [f"{name}: {mode} (s)", figures["median"], figures["min"]]
            for name, modes in req.items()
            for mode, figures in modes.items()
        ]
        + [[f"`true`, {k} (ms)", v["median"], v["min"]] for k, v in r["command_ms"].items()],
    )
    return rows, detail
