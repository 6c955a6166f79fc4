"""Dashboard pages with 10,000 tasks: `python -m bench dashboard [--quick]`.

The issue's target: every page loads in under 300 ms with 10,000 tasks in the list (paged).
Sizes: 1,000 tasks waiting for approval by default (the inbox target's size), 2,000 with
`--full`; `--quick` lists 2,000 tasks, 100 of them waiting.
The bench seeds the embedded stack (`bench.dashboard_seed`: 10,000 tasks in Temporal, their
usage rows, memories, tasks waiting for approval with the worker up to answer for them),
serves the surfaces app with uvicorn in a child process on a loopback port, signs in with a
one-time login token as `openloop up` prints it, and loads each page over HTTP one at a
time, as a person would: the pages in turn, `loads` rounds, after a warm-up round. A page
meets the target when its p95 is under 300 ms. Seeding is timed too.
"""

from __future__ import annotations

import asyncio
import html
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from bench import dashboard_seed as seed
from bench.common import APPROVER, REPO_ROOT, Stack, log, new_queue, spawn_worker, stats
from bench.tables import table, verdict
from surfaces.web.auth import login_token
from workers.embedded import free_port, stop_process
from workers.history import task_query

TARGET_MS = 300.0
_NEXT_PAGE = re.compile(r'href="([^"]*)">Next page')


@dataclass
class Sizes:
    tasks: int = 10_000  # listed in all: real and waiting tasks included
    real_tasks: int = 100
    waiting: int = 1_000  # the first page is all live tasks, as on a busy morning
    long_steps: int = 100  # one finished task this long has its page timed too
    memories: int = 2_000
    agents: int = 8
    channels: int = 20
    later_page: int = 40  # the "later page" is this many pages in (25 tasks a page)
    loads: int = 30  # timed loads of each page

    @classmethod
    def quick(cls) -> Sizes:
        return cls(tasks=2_000, real_tasks=50, waiting=100, memories=500, later_page=10, loads=15)

    @classmethod
    def full(cls) -> Sizes:
        """As many requests waiting at once as a large team might leave overnight."""
        return cls(waiting=2_000)

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(
            tasks=40, real_tasks=3, waiting=2, long_steps=4, memories=10, agents=4, later_page=1, loads=2
        )


def pages(sizes: Sizes, real_task: str, long_task: str, waiting_task: str) -> dict[str, str]:
    """What a person opens, by name: paths under /dashboard (the later page is filled in
    once the page links have been followed there)."""
    return {
        "tasks, first page": "/tasks",
        "tasks, later page": "",
        "tasks, by agent": "/tasks?agent=dash-3",
        "tasks, by status (1%)": "/tasks?status=budget_exhausted",
        "task page (finished)": f"/tasks/{real_task}",
        f"task page (finished, {sizes.long_steps} steps)": f"/tasks/{long_task}",
        "task page (waiting, live)": f"/tasks/{waiting_task}",
        "approvals inbox": "/approvals",
        "spend": "/spend",
        "spend, one agent": "/spend?agent=dash-3",
        "memory": "/memory",
        "memory, search": "/memory?agent=dash-3&key=cli:dash-ch-3&q=when+does+service+3+deploy",
        "agents": "/agents",
        "loops": "/loops",
        "playbooks": "/playbooks",
    }


def serve(settings_env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """The surfaces app on uvicorn in a child process; returns it and its base URL."""
    port = free_port()
    env = {**os.environ, **settings_env, "OPENLOOP_HTTP_ADDRESS": f"127.0.0.1:{port}"}
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.dashboard", "--serve"], env=env, cwd=REPO_ROOT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the surfaces server exited during start-up")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    stop_process(process)
    raise TimeoutError("the surfaces server did not start")


def _serve_here() -> None:
    """Child process: the surfaces app on uvicorn, configured from the environment."""
    import uvicorn

    from config.settings import Settings
    from surfaces.app import create_app
    from surfaces.client import connect

    async def run() -> None:
        settings = Settings.from_env()
        app = create_app(settings, await connect(settings))
        config = uvicorn.Config(
            app, host="127.0.0.1", port=settings.http_port, log_level="warning", access_log=False
        )
        await uvicorn.Server(config).serve()

    asyncio.run(run())


async def later_page(http: httpx.AsyncClient, depth: int) -> str:
    """The list's path `depth` pages in, following each page's Next link."""
    path = "/tasks"
    for _ in range(depth):
        page = await http.get(f"/dashboard{path}")
        found = _NEXT_PAGE.search(page.text)
        if found is None:
            break
        token = parse_qs(urlsplit(html.unescape(found.group(1))).query)["page"][0]
        path = str(httpx.URL("/tasks", params={"page": token}))
    return path


async def time_pages(url: str, login: str, paths: dict[str, str], loads: int) -> dict[str, Any]:
    """Each page `loads` times in turn after one warm-up round: milliseconds and statuses."""
    timings: dict[str, list[float]] = {name: [] for name in paths}
    statuses: dict[str, dict[str, int]] = {name: {} for name in paths}
    sizes: dict[str, int] = {}
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as http:
        signed_in = await http.get(f"/dashboard/login?token={login}")
        if signed_in.status_code != 303:
            raise RuntimeError(f"sign-in refused: {signed_in.status_code} {signed_in.text[:200]}")
        for round_ in range(loads + 1):
            for name, path in paths.items():
                began = time.perf_counter()
                response = await http.get(f"/dashboard{path}")
                elapsed = (time.perf_counter() - began) * 1000
                if round_ == 0:
                    sizes[name] = len(response.content)
                    continue
                timings[name].append(elapsed)
                key = str(response.status_code)
                statuses[name][key] = statuses[name].get(key, 0) + 1
    return {
        name: {
            **stats(timings[name], 1),
            "statuses": statuses[name],
            "bytes": sizes[name],
            "path": paths[name],
        }
        for name in paths
    }


async def run(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    await seed.apply_agents(stack, sizes.agents)
    queue = new_queue("dash")
    worker = spawn_worker(stack.settings, queue)
    server: subprocess.Popen[bytes] | None = None
    try:
        listed = sizes.tasks - sizes.real_tasks - sizes.waiting - 1
        log(f"dashboard: seeding {listed} listed tasks")
        ids, seconds = await seed.seed_listed(stack, listed, sizes.agents, sizes.channels)
        figures["listed_tasks"] = {
            "count": listed,
            "seconds": round(seconds, 1),
            "per_s": round(listed / seconds, 1),
        }
        seconds = await seed.seed_usage(stack, ids, sizes.agents, sizes.channels)
        figures["usage_rows"] = {"count": 2 * listed, "seconds": round(seconds, 1)}
        log(f"dashboard: {sizes.real_tasks} real tasks, {sizes.waiting} waiting, {sizes.memories} memories")
        real, seconds = await seed.seed_real(stack, queue, sizes.real_tasks, sizes.agents, sizes.channels)
        figures["real_tasks"] = {
            "count": len(real),
            "seconds": round(seconds, 1),
            "per_s": round(len(real) / seconds, 1),
        }
        began = time.perf_counter()
        long_task = await seed.seed_long(stack, queue, sizes.long_steps)
        figures["long_task"] = {"count": 1, "seconds": round(time.perf_counter() - began, 1)}
        began = time.perf_counter()
        waiting = await seed.seed_waiting(stack, queue, sizes.waiting)
        figures["waiting_tasks"] = {"count": len(waiting), "seconds": round(time.perf_counter() - began, 1)}
        seconds = await seed.seed_memories(stack, sizes.memories, sizes.agents, sizes.channels)
        figures["memories"] = {"count": sizes.memories, "seconds": round(seconds, 1)}
        ours = ", ".join(f"'{name}'" for name in [*seed.agent_names(sizes.agents), "bench-approvals"])
        await seed.until_counted(stack.client, task_query(extra=f"OpenLoopAgent IN ({ours})"), sizes.tasks)
        settings = stack.settings
        server, url = serve(
            {
                "OPENLOOP_DATABASE_URL": settings.require_database_url(),
                "OPENLOOP_TEMPORAL_ADDRESS": settings.temporal_address,
                "OPENLOOP_STATE_DIR": str(settings.state_dir),
                "OPENLOOP_TASK_QUEUE": queue,
            }
        )
        paths = pages(sizes, real[-1], long_task, waiting[0])
        async with httpx.AsyncClient(base_url=url, timeout=30.0) as http:
            await http.get(f"/dashboard/login?token={login_token(settings, APPROVER, 'admin')}")
            paths["tasks, later page"] = await later_page(http, sizes.later_page)
        log(f"dashboard: {len(paths)} pages, {sizes.loads} loads each")
        timed = await time_pages(url, login_token(settings, APPROVER, "admin"), paths, sizes.loads)
        for task_id in waiting:  # nobody will approve them: end them rather than leave them waiting
            await stack.client.get_workflow_handle(task_id).terminate("dashboard bench over")
    finally:
        stop_process(server)
        stop_process(worker)
    report = {
        "bench": "dashboard",
        "sizes": asdict(sizes),
        "target_ms": TARGET_MS,
        "seeding": figures,
        "pages": timed,
        "targets": {name: page["p95"] < TARGET_MS for name, page in timed.items()},
    }
    print(render(report))
    return report


def render(report: dict[str, Any]) -> str:
    """The pages against the target, as a Markdown table."""
    rows = [
        [
            name,
            f"{p['p50']:.1f}",
            f"{p['p95']:.1f}",
            f"{p['max']:.1f}",
            f"{p['bytes']:,}",
            verdict(p["p95"] < TARGET_MS),
        ]
        for name, p in report["pages"].items()
    ]
    head = ["page", "p50 ms", "p95 ms", "max ms", "bytes", f"p95 < {TARGET_MS:.0f} ms"]
    seeding = ", ".join(f"{k} {v['count']:,} in {v['seconds']} s" for k, v in report["seeding"].items())
    return f"{table(head, rows)}\n\nSeeding: {seeding}."


if __name__ == "__main__" and "--serve" in sys.argv:
    _serve_here()
