"""Ack latency of `POST /slack/events` under load: `python -m bench.slack_ack`.

Brings up a real Temporal dev server and the embedded Postgres, stores an agent bound to a
channel, serves the surfaces app with uvicorn in a child process on a free loopback port,
then sends signed `app_mention` events (each a new task) at a fixed rate from an async
httpx load generator with bounded concurrency. Latency is measured from the scheduled send
time, so a slow server cannot hide queueing (no coordinated omission). No worker runs: the
ack path is what Slack waits on (verify the signature, record the event in the inbox).

After the load it waits for the inbox to drain and reports how long events waited between
the ack and their workflow start (the dispatcher starts tasks as fast as Temporal takes them).

Prints p50/p99 and writes bench/results/slack_ack.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from slack_sdk.signature import SignatureVerifier

RESULTS = Path(__file__).parent / "results" / "slack_ack.json"
SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH"
BOT_USER = "U0BENCHBOT"
TARGET_P99_MS = 100.0


def _serve() -> None:
    """Child process: the surfaces app on uvicorn, configured from the environment."""
    import uvicorn

    from config.settings import Settings
    from surfaces.app import create_app
    from surfaces.client import connect

    async def run() -> None:
        settings = Settings.from_env()
        app = create_app(settings, await connect(settings))
        # Keep-alive longer than the run, so an idle pooled connection is never closed under
        # the load generator (a client-side artefact, not an ack).
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=settings.http_port,
            lifespan="on",
            log_level="warning",
            access_log=False,
            timeout_keep_alive=120,
        )
        await uvicorn.Server(config).serve()

    asyncio.run(run())


def _event(index: int) -> bytes:
    ts = f"{int(time.time())}.{index:06d}"
    return json.dumps(
        {
            "type": "event_callback",
            "team_id": "T0BENCH",
            "api_app_id": "A0BENCH",
            "event_id": f"EvBench{uuid.uuid4().hex[:16]}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": "T0BENCH", "user_id": BOT_USER, "is_bot": True}],
            "event": {
                "type": "app_mention",
                "user": "U0ALICE",
                "channel": CHANNEL,
                "ts": ts,
                "text": f"<@{BOT_USER}> summarize this thread ({index})",
            },
        }
    ).encode()


def _headers(body: bytes) -> dict[str, str]:
    ts = str(int(time.time()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body) or ""
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
    }


async def _load(url: str, rate: float, seconds: float, concurrency: int, warmup: int) -> dict[str, Any]:
    # aiohttp, with every request signed before the clock starts: the generator must stay
    # far cheaper than the server it measures (httpx's pool slows down as connections pile
    # up, and the generator then measures itself).
    total = int(rate * seconds)
    prepared = [(body, _headers(body)) for body in (_event(i) for i in range(warmup + total))]
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    timeout = aiohttp.ClientTimeout(total=10.0)
    async with aiohttp.ClientSession(base_url=url, connector=connector, timeout=timeout) as http:
        for body, headers in prepared[:warmup]:
            async with http.post("/slack/events", data=body, headers=headers) as response:
                await response.read()
        latencies: list[float] = []
        statuses: dict[str, int] = {}

        async def one(index: int, scheduled: float) -> None:
            body, headers = prepared[warmup + index]
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                async with http.post("/slack/events", data=body, headers=headers) as response:
                    await response.read()
                    key = str(response.status)
            except (aiohttp.ClientError, TimeoutError) as exc:
                key = type(exc).__name__
            latencies.append((time.perf_counter() - scheduled) * 1000)
            statuses[key] = statuses.get(key, 0) + 1

        start = time.perf_counter() + 0.2
        began = time.perf_counter()
        await asyncio.gather(*(one(i, start + i / rate) for i in range(total)))
        elapsed = time.perf_counter() - began
    latencies.sort()

    def pct(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2)

    return {
        "requests": total,
        "statuses": statuses,
        "target_rps": rate,
        "achieved_rps": round(total / elapsed, 1),
        "duration_s": round(elapsed, 2),
        "concurrency_limit": concurrency,
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "max_ms": round(latencies[-1], 2),
    }


async def _start_capacity(address: str, count: int = 200) -> float:
    """Workflow starts per second the dev server takes with no surfaces in the way: the
    ceiling for an ack path whose one piece of work is a start."""
    from temporalio.client import Client

    client = await Client.connect(address)
    queue = f"bench-capacity-{uuid.uuid4().hex[:8]}"
    began = time.perf_counter()
    await asyncio.gather(
        *(
            client.start_workflow("bench.Noop", id=f"cap-{uuid.uuid4().hex}", task_queue=queue)
            for _ in range(count)
        )
    )
    return round(count / (time.perf_counter() - began), 1)


async def _drain(database_url: str, expected: int, give_up_after: float = 300.0) -> dict[str, Any]:
    """Wait until every recorded event was started; how long they waited after the ack."""
    import psycopg

    began = time.perf_counter()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        while True:
            cursor = await conn.execute(
                "SELECT count(*) FILTER (WHERE handled_at IS NULL), count(*) FROM slack_inbox"
            )
            row = await cursor.fetchone()
            pending, total = (row[0], row[1]) if row else (0, 0)
            if (pending == 0 and total >= expected) or time.perf_counter() - began > give_up_after:
                break
            await asyncio.sleep(0.2)
        cursor = await conn.execute(
            "SELECT extract(epoch FROM handled_at - received_at) * 1000, outcome "
            "FROM slack_inbox WHERE handled_at IS NOT NULL ORDER BY 1"
        )
        rows = await cursor.fetchall()
    lags = [float(r[0]) for r in rows]
    outcomes: dict[str, int] = {}
    for _, outcome in rows:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    def pct(q: float) -> float:
        return round(lags[min(len(lags) - 1, int(q * len(lags)))], 1) if lags else 0.0

    return {
        "recorded": total,
        "unstarted_after_drain": pending,
        "outcomes": outcomes,
        "drained_s_after_load": round(time.perf_counter() - began, 2),
        "ack_to_start_p50_ms": pct(0.50),
        "ack_to_start_p99_ms": pct(0.99),
        "ack_to_start_max_ms": round(lags[-1], 1) if lags else 0.0,
    }


async def _prepare(database_url: str) -> None:
    from activities.store.agents import apply_agent
    from activities.store.db import apply_migrations_async, close_pools, get_pool
    from config.agent import AgentConfig

    await apply_migrations_async(database_url)
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": "bench"},
            "spec": {"surfaces": {"slack": {"channels": [CHANNEL]}}},
        }
    )
    await apply_agent(await get_pool(database_url), config)
    await close_pools()


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the surfaces server exited during start-up")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError("the surfaces server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=256, help="requests in flight")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve()
        return

    from workers.embedded import EmbeddedPostgres, TemporalDevServer, free_port, stop_process

    with tempfile.TemporaryDirectory(prefix="olb") as tmp:
        temporal = TemporalDevServer(
            port=free_port(), ui_port=None, db_file=None, log_file=Path(tmp) / "temporal.log"
        )
        postgres = EmbeddedPostgres(Path(tmp) / "pg")
        server: subprocess.Popen[bytes] | None = None
        try:
            temporal.start()
            database_url = postgres.start()
            temporal.wait_healthy()
            asyncio.run(_prepare(database_url))
            before = asyncio.run(_start_capacity(temporal.address))
            port = free_port()
            env = {
                **os.environ,
                "OPENLOOP_DATABASE_URL": database_url,
                "OPENLOOP_TEMPORAL_ADDRESS": temporal.address,
                "OPENLOOP_HTTP_ADDRESS": f"127.0.0.1:{port}",
                "OPENLOOP_TASK_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
                "SLACK_SIGNING_SECRET": SECRET,
                "OPENLOOP_STATE_DIR": tmp,
            }
            server = subprocess.Popen(
                [sys.executable, "-m", "bench.slack_ack", "--serve"], env=env, start_new_session=True
            )
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url, server)
            result = asyncio.run(_load(url, args.rate, args.seconds, args.concurrency, args.warmup))
            result["dispatch"] = asyncio.run(_drain(database_url, result["requests"] + args.warmup))
            after = asyncio.run(_start_capacity(temporal.address))
        finally:
            stop_process(server)
            postgres.stop()
            temporal.stop()
    result.update(
        {
            "bench": "slack_ack",
            "endpoint": "POST /slack/events (signed app_mention, new task each; recorded, then started)",
            "target_p99_ms": TARGET_P99_MS,
            "meets_target": result["p99_ms"] < TARGET_P99_MS,
            "dev_server_bare_start_rps": {"before": before, "after": after},
            "load_average_1m": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"/slack/events ack latency at {result['achieved_rps']} req/s over "
        f"{result['duration_s']} s ({result['requests']} requests, statuses {result['statuses']}):"
    )
    print(
        f"  p50 {result['p50_ms']} ms   p90 {result['p90_ms']} ms   p99 {result['p99_ms']} ms"
        f"   max {result['max_ms']} ms   (target p99 < {TARGET_P99_MS:.0f} ms)"
    )
    dispatch = result["dispatch"]
    print(
        f"  dispatch: {dispatch['recorded']} recorded events started {dispatch['outcomes']}, "
        f"inbox drained {dispatch['drained_s_after_load']} s after the load; ack -> start "
        f"p50 {dispatch['ack_to_start_p50_ms']} ms, p99 {dispatch['ack_to_start_p99_ms']} ms"
    )
    print(
        f"  the dev server alone took {before} (before) / {after} (after) workflow starts/s; "
        f"load average {result['load_average_1m']} on {result['cpus']} CPUs"
    )
    print(f"  written to {args.out}")


if __name__ == "__main__":
    main()
