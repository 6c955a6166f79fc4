"""MCP tools against native ones: `python -m bench mcp [--quick]`.

Real MCP servers (the SDK's own server API, `tests/fakes/mcp_servers.py`, one process each,
streamable HTTP on 127.0.0.1, started before any timing) and the real MCP activity code,
called in-process like orchestration's `tool_itself_ms`, so what is measured is the work a
worker does, not Temporal's round trip (which is the same for both kinds of remote tool).

1. One read step, interleaved round by round (each round in a rotated order):
   - native: `run_tool` for github.get_issue against the fake GitHub (PyGithub, audit row);
   - mcp_activity: the `call_mcp_tool` body for notes.read_note as built (recorded-result
     lookup, `gateway.call` on the worker's cached session with the reused listing's schema
     check, audit row, recorded result);
   - mcp_gateway: `gateway.call` alone;
   - mcp_parts: the activity body as it was before the session cache (connect, list, call,
     close on a connection of its own), each part timed;
   - mcp_open_session / mcp_open_session_no_list: the same body on a connection opened
     once for the whole run, with the listing and without it (the floor a cache can reach).
2. The listing at task start (`list_mcp_tools`: every server at once, specs saved) for 1,
   5 and 20 servers, interleaved: "uncached" (a connection and a listing per server per task,
   as before the cache), "sessions_only" (sessions kept, listed afresh each task: a listing
   whose reuse expired) and "as_built" (sessions kept and listings reused for their TTL),
   with the CPU it takes in this process (the worker's part) and in the servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client

from activities.mcp import client as mcp_client
from activities.mcp import gateway
from activities.mcp import listings as mcp_listings
from activities.mcp import sessions as mcp_sessions
from activities.mcp.mcp_activities import call_mcp_tool, list_mcp_tools
from activities.mcp.reuse_settings import ReuseSettings
from activities.runtime import runtime
from activities.store import task_tools
from activities.store.tool_calls import bound_and_audit
from activities.tools.tool_activities import run_tool
from bench.common import REPO_ROOT, Stack, _proc_cpu, log, stats
from bench.scripted import BENCH_REPO, ISSUES
from config.mcp import McpServer
from workers.embedded import free_port, stop_process
from workflows.mcp_types import McpCallInput, McpListInput
from workflows.policy import memory_scope
from workflows.types import SurfaceContext, ToolCallInput, ToolCallResult

CALL_VARIANTS = (
    "native",
    "mcp_activity",
    "mcp_gateway",
    "mcp_parts",
    "mcp_open_session",
    "mcp_open_session_no_list",
)
LISTING_VARIANTS = ("uncached", "sessions_only", "as_built")
LISTING_REUSE = {
    "uncached": ReuseSettings(listing_ttl_seconds=0, max_sessions=0),
    "sessions_only": ReuseSettings(listing_ttl_seconds=0),
    "as_built": ReuseSettings(),
}
PARTS = ("db_lookup", "connect", "list", "call", "close", "audit", "record")
TOOL, ARGUMENTS = "read_note", {"name": "deploys"}
TARGET_CALL_RATIO = 1.2
TARGET_LISTING_RATIO = 2.0
SERVER_START_SECONDS = 90.0


@dataclass
class Sizes:
    call_rounds: int = 200
    listing_rounds: int = 40
    server_counts: tuple[int, ...] = (1, 5, 20)
    warmup: int = 5

    @classmethod
    def quick(cls) -> Sizes:
        return cls(call_rounds=60, listing_rounds=15)

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(call_rounds=2, listing_rounds=2, server_counts=(1, 2), warmup=1)


@contextlib.contextmanager
def http_servers(count: int, state: Path) -> Iterator[list[tuple[McpServer, int]]]:
    """`count` streamable-HTTP test servers, each in its own process; (config, pid) pairs."""
    state.mkdir(parents=True, exist_ok=True)
    ports: list[int] = []
    while len(ports) < count:  # free_port picks at random: no two servers on one port
        if (port := free_port()) not in ports:
            ports.append(port)
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.mcp_servers", "http", str(state), str(port)],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for port in ports
    ]
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        for port, process in zip(ports, processes, strict=True):
            while not _listening(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the MCP test server on port {port} did not start")
                time.sleep(0.1)
        yield [
            (
                McpServer.model_validate(
                    {
                        "name": f"notes{i}",
                        "transport": "streamable-http",
                        "url": f"http://127.0.0.1:{port}/mcp",
                        "allow": ["*"],
                        "writes": ["create_note"],
                    }
                ),
                process.pid,
            )
            for i, (port, process) in enumerate(zip(ports, processes, strict=True), start=1)
        ]
    finally:
        for process in processes:
            stop_process(process)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


class Calls:
    """Builds each variant's call: a fresh task id and key, as a new step would have."""

    def __init__(self, stack: Stack, server: McpServer, sha: str) -> None:
        agent = stack.agents["bench"].config
        self.context = SurfaceContext("cli", "bench", "cli:bench", event_id="mcp-bench")
        self.memory = memory_scope(agent, self.context)
        self.server, self.sha, self.count = server, sha, 0

    def input(self, tool: str, arguments: dict[str, Any]) -> ToolCallInput:
        self.count += 1
        key = f"mcp-bench-{uuid.uuid4().hex[:12]}"
        return ToolCallInput(
            f"task-{key}", 1, "call-1", tool, arguments, key, self.context, self.memory, "cli:bench"
        )

    def native(self) -> ToolCallInput:
        return self.input("github.get_issue", {"repo": BENCH_REPO, "number": 1 + self.count % ISSUES})

    def mcp(self) -> McpCallInput:
        return McpCallInput(
            self.input(f"{self.server.name}.{TOOL}", dict(ARGUMENTS)), self.server, TOOL, self.sha
        )


async def activity_in_parts(
    inp: McpCallInput,
    parts: dict[str, list[float]] | None = None,
    *,
    held: Client | None = None,
    listing: bool = True,
) -> None:
    """`call_mcp_tool`'s body with each part timed into `parts`: on a `held` connection when
    given (no connect, no close), without the listing when `listing` is off (one reused)."""
    pool = await runtime().pool()
    marks = [time.perf_counter()]

    def mark(part: str) -> None:
        marks.append(time.perf_counter())
        if parts is not None:
            parts[part].append((marks[-1] - marks[-2]) * 1000)

    if await task_tools.recorded_result(pool, inp.call.idempotency_key) is not None:
        raise RuntimeError("a fresh key found a recorded result")
    mark("db_lookup")
    async with contextlib.AsyncExitStack() as exits:
        client = held if held is not None else await exits.enter_async_context(mcp_client.connect(inp.server))
        mark("connect")
        if listing:
            listed = await mcp_listings._listing(client)
            if not any(t.name == inp.tool for t in listed):
                raise RuntimeError(f"{inp.tool} is not listed")
        mark("list")
        result = await client.call_tool(inp.tool, dict(inp.call.arguments))
        mark("call")
    mark("close")
    if result.is_error:
        raise RuntimeError(f"{inp.tool} failed")
    output = gateway._text(result.content, result.structured_content)
    async with pool.connection() as conn:
        bounded = await bound_and_audit(conn, inp.call, ToolCallResult(ok=True, output=output))
    mark("audit")
    await task_tools.record_result(pool, inp.call.idempotency_key, inp.call.task_id, bounded)
    mark("record")


class Reuse:
    """A worker's session cache and listing reuse, set up as `settings` say, made this loop's
    own while active (the bench interleaves several)."""

    def __init__(self, settings: ReuseSettings) -> None:
        self.sessions = mcp_sessions.Sessions(settings)
        self.listings = mcp_listings.Listings(settings.listing_ttl_seconds)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        sessions, listings = mcp_sessions._by_loop.pop(loop, None), mcp_listings._by_loop.pop(loop, None)
        mcp_sessions._by_loop[loop], mcp_listings._by_loop[loop] = self.sessions, self.listings
        try:
            yield
        finally:
            del mcp_sessions._by_loop[loop], mcp_listings._by_loop[loop]
            if sessions is not None:
                mcp_sessions._by_loop[loop] = sessions
            if listings is not None:
                mcp_listings._by_loop[loop] = listings


@contextlib.contextmanager
def http_client_factory(factory: Any) -> Iterator[None]:
    """The MCP client builds its HTTP clients with `factory` meanwhile (one task at a time here)."""
    original = mcp_client.http_client
    mcp_client.http_client = factory
    try:
        yield
    finally:
        mcp_client.http_client = original


async def requests_per_call(inp: McpCallInput) -> list[str]:
    """The HTTP requests one `gateway.call` makes on a warm worker (method and JSON-RPC
    method): the second call of a fresh cache, the first having connected and listed."""
    seen: list[str] = []
    factory = mcp_client.http_client

    def counting(
        headers: dict[str, str], timeout: httpx2.Timeout, watch: mcp_client.RefusalWatch | None = None
    ) -> httpx2.AsyncClient:
        http = factory(headers=headers, timeout=timeout, watch=watch)

        async def hook(request: Any) -> None:
            body = request.content.decode(errors="replace") if request.method == "POST" else ""
            method = body.split('"method":"', 1)[1].split('"', 1)[0] if '"method":"' in body else ""
            seen.append(f"{request.method} {method}".strip())

        http.event_hooks["request"].append(hook)
        return http

    reuse = Reuse(ReuseSettings())
    with http_client_factory(counting), reuse.active():
        for _ in range(2):
            seen.clear()
            await gateway.call(
                inp.server, inp.tool, dict(inp.call.arguments), inp.call.idempotency_key, inp.schema_sha256
            )
    await reuse.sessions.close()
    return seen


async def call_round(
    calls: Calls, held: Client, order: list[str], times: dict[str, list[float]], parts: dict[str, list[float]]
) -> None:
    for variant in order:
        started = time.perf_counter()
        if variant == "native":
            out = await run_tool(calls.native())
            if not out.ok:
                raise RuntimeError(f"github.get_issue failed: {out.output[:200]}")
        elif variant == "mcp_activity":
            out = await call_mcp_tool(calls.mcp())  # as built: the worker's session and listing
            if not out.ok:
                raise RuntimeError(f"{TOOL} failed: {out.output[:200]}")
        elif variant == "mcp_gateway":
            inp = calls.mcp()
            await gateway.call(inp.server, TOOL, dict(ARGUMENTS), inp.call.idempotency_key, inp.schema_sha256)
        elif variant == "mcp_parts":
            await activity_in_parts(calls.mcp(), parts)
        elif variant == "mcp_open_session":
            await activity_in_parts(calls.mcp(), held=held)
        else:
            await activity_in_parts(calls.mcp(), held=held, listing=False)
        times[variant].append((time.perf_counter() - started) * 1000)


async def measure_calls(stack: Stack, server: McpServer, sizes: Sizes) -> dict[str, Any]:
    specs = await gateway.allowed_specs(server)
    sha = next(spec.sha256 for spec in specs if spec.name == f"{server.name}.{TOOL}")
    calls = Calls(stack, server, sha)
    native_out = await run_tool(calls.native())
    mcp_out = await call_mcp_tool(calls.mcp())
    requests = await requests_per_call(calls.mcp())
    times: dict[str, list[float]] = {v: [] for v in CALL_VARIANTS}
    parts: dict[str, list[float]] = {p: [] for p in PARTS}
    async with mcp_client.connect(server) as held:
        for _ in range(sizes.warmup):
            await call_round(
                calls, held, list(CALL_VARIANTS), {v: [] for v in CALL_VARIANTS}, {p: [] for p in PARTS}
            )
        for i in range(sizes.call_rounds):
            shift = i % len(CALL_VARIANTS)
            await call_round(calls, held, [*CALL_VARIANTS[shift:], *CALL_VARIANTS[:shift]], times, parts)
    return {
        "call_ms": {v: stats(t) for v, t in times.items()},
        "mcp_parts_ms": {p: stats(t) for p, t in parts.items()},
        "http_requests_per_gateway_call": requests,
        "output_chars": {"native": len(native_out.output), "mcp": len(mcp_out.output)},
    }


async def measure_listing(servers: list[tuple[McpServer, int]], sizes: Sizes) -> dict[str, Any]:
    counts = [n for n in sizes.server_counts if n <= len(servers)]
    runs = [(n, how) for n in counts for how in LISTING_VARIANTS]
    times: dict[tuple[int, str], list[float]] = {run: [] for run in runs}
    cpu: dict[tuple[int, str], dict[str, float]] = {run: {"worker": 0.0, "servers": 0.0} for run in runs}

    reuse = {how: Reuse(LISTING_REUSE[how]) for how in LISTING_VARIANTS}

    async def listing(n: int, how: str) -> None:
        task = McpListInput(f"task-mcp-list-{uuid.uuid4().hex[:12]}", [s for s, _ in servers[:n]])
        with reuse[how].active():
            result = await list_mcp_tools(task)
        if not all(status.ok for status in result.servers):
            raise RuntimeError(f"a listing failed: {[s.problem for s in result.servers if not s.ok]}")

    for run in runs * sizes.warmup:
        await listing(*run)
    for i in range(sizes.listing_rounds):
        shift = i % len(runs)
        for n, how in [*runs[shift:], *runs[:shift]]:
            pids = [pid for _, pid in servers[:n]]
            own, theirs = time.process_time(), sum(_proc_cpu(pid) for pid in pids)
            started = time.perf_counter()
            await listing(n, how)
            times[n, how].append((time.perf_counter() - started) * 1000)
            cpu[n, how]["worker"] += time.process_time() - own
            cpu[n, how]["servers"] += sum(_proc_cpu(pid) for pid in pids) - theirs
    for each in reuse.values():
        await each.sessions.close()
    rounds = max(1, sizes.listing_rounds)
    return {
        "listing_ms": {how: {str(n): stats(times[n, how]) for n in counts} for how in LISTING_VARIANTS},
        "listing_cpu_ms_per_listing": {
            how: {str(n): {k: round(v * 1000 / rounds, 1) for k, v in cpu[n, how].items()} for n in counts}
            for how in LISTING_VARIANTS
        },
    }


async def run(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    count = max(sizes.server_counts)
    log(f"mcp: starting {count} MCP test server processes")
    with http_servers(count, stack.settings.state_dir / "mcp-bench") as servers:
        log("mcp: one read step, native against MCP")
        calls = await measure_calls(stack, servers[0][0], sizes)
        log("mcp: the listing at task start")
        listing = await measure_listing(servers, sizes)
    call_ms, lists = calls["call_ms"], listing["listing_ms"]
    ratios = {q: round(call_ms["mcp_activity"][q] / call_ms["native"][q], 2) for q in ("p50", "p95")}
    fixes = {
        v: round(call_ms[v]["p50"] / call_ms["native"]["p50"], 2)
        for v in ("mcp_parts", "mcp_open_session", "mcp_open_session_no_list")
    }
    low, high = str(min(sizes.server_counts)), str(max(sizes.server_counts))
    listing_ratios = {how: round(lists[how][high]["p50"] / lists[how][low]["p50"], 2) for how in lists}
    return {
        "bench": "mcp",
        "sizes": asdict(sizes),
        **calls,
        "mcp_activity_over_native": ratios,
        "fixes_over_native_p50": fixes,
        **listing,
        "listing_ratio_p50": {"servers": f"{high} / {low}", **listing_ratios},
        "targets": {
            "mcp_read_step_p50_within_1.2x_native": ratios["p50"] <= TARGET_CALL_RATIO,
            "listing_most_servers_p50_within_2x_one": listing_ratios["as_built"] <= TARGET_LISTING_RATIO,
        },
    }
