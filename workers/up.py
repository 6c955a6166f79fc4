"""`openloop up`: the whole stack on one machine, nothing to install by hand.

Starts PostgreSQL + pgvector (pgserver) and the Temporal dev server (Web UI included) with
their data under the state dir, applies migrations, applies the shipped example agents on
first run, compiles and applies a `./playbooks` folder when there is one (its problems are
reported, the stack starts without it), then runs the worker, a loop worker and the HTTP
surfaces server in this process.
Ctrl-C or SIGTERM stops every child it started; a later `up` with the same state dir keeps all
data, and a second one while it runs is refused (`workers.state_lock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from rich.console import Console
from rich.markup import escape
from temporalio.client import Client

from activities.model_names import check_model_name
from activities.store.agents import apply_agent, list_agents
from activities.store.db import apply_migrations_async, close_pools, get_pool
from activities.store.skills import apply_skill
from activities.tools.catalog import tool_permissions
from config.loader import EXAMPLES_DIR, load_agent_file
from config.settings import Settings, write_stack_file
from config.skills import DEFAULT_DIR as SKILLS_DIR
from config.skills import load_skills
from surfaces.app import create_app
from surfaces.cli.terminal import commands
from surfaces.client import connect
from surfaces.web import login_url
from workers.embedded import EmbeddedPostgres, TemporalDevServer, listen_socket, ports_taken
from workers.loops import build_loop_workers
from workers.run import report_model_keys
from workers.state_lock import hold_state_dir
from workers.worker import build_worker


@dataclass
class Stack:
    settings: Settings
    console: Console
    postgres: EmbeddedPostgres | None = None
    temporal: TemporalDevServer | None = None
    database_url: str = ""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.temporal_ui_port}"

    def start_services(self, progress: Callable[[str], None]) -> None:
        state = self.settings.state_dir.resolve()
        state.mkdir(parents=True, exist_ok=True)
        external = os.environ.get("OPENLOOP_DATABASE_URL")
        if external:
            self.database_url = external
            progress("using the database at OPENLOOP_DATABASE_URL")
        else:
            progress("starting PostgreSQL 16 + pgvector")
            self.postgres = EmbeddedPostgres(state / "pg")
            self.database_url = self.postgres.start()
        progress("starting the Temporal dev server and Web UI")
        port = int(self.settings.temporal_address.rsplit(":", 1)[1])
        self.temporal = TemporalDevServer(
            port=port,
            ui_port=self.settings.temporal_ui_port,
            db_file=state / "temporal.db",
            log_file=state / "logs" / "temporal.log",
            namespace=self.settings.namespace,
        )
        self.temporal.start()
        self.temporal.wait_healthy()

    def stop_services(self) -> None:
        if self.temporal is not None:
            self.temporal.stop()
        if self.postgres is not None:
            self.postgres.stop()


async def apply_examples_on_first_run(database_url: str) -> list[str]:
    """An empty database gets the shipped example agents, so `openloop ask helper` just works."""
    pool = await get_pool(database_url)
    if await list_agents(pool):
        return []
    applied = []
    for path in await asyncio.to_thread(lambda: sorted(Path(EXAMPLES_DIR).glob("*.yaml"))):
        # The model check imports LiteLLM (seconds) the first time a name needs it.
        config = await asyncio.to_thread(
            load_agent_file, path, tools=tool_permissions(), models=check_model_name
        )
        for skill in await asyncio.to_thread(load_skills, SKILLS_DIR, config.spec.skills):
            await apply_skill(pool, skill, applied_by="openloop up")  # before the agent naming it
        stored, _ = await apply_agent(pool, config, source=str(path), applied_by="openloop up")
        applied.append(stored.name)
    return applied


def wanted_ports(settings: Settings) -> list[tuple[str, str, int]]:
    """Every port `up` listens on (directly or through a child), checked before it starts any."""
    host, port = settings.temporal_address.rsplit(":", 1)
    return [
        ("Temporal", host, int(port)),
        ("Temporal Web UI", "127.0.0.1", settings.temporal_ui_port),
        ("HTTP", settings.http_host, settings.http_port),
    ]


async def run_stack(
    settings: Settings, console: Console, on_ready: Callable[[Stack], object] | None = None
) -> None:
    """Start every part, serve until Ctrl-C or SIGTERM, then stop every part.

    Nothing starts when another `up` holds the state folder (`workers.state_lock`, held until
    every part has stopped) or a port is taken. A part that fails to start (the HTTP server
    included) stops the parts already started and leaves no stack.json behind.
    """
    ui = f"http://127.0.0.1:{settings.temporal_ui_port}"
    where = {
        "temporal_address": settings.temporal_address,
        "web_ui": ui,
        "http": f"http://{settings.http_address}",
    }
    with hold_state_dir(settings.state_dir, where):
        await _run_stack(settings, console, on_ready)


async def _run_stack(
    settings: Settings, console: Console, on_ready: Callable[[Stack], object] | None
) -> None:
    taken = ports_taken(wanted_ports(settings))
    if taken:
        raise RuntimeError(
            "; ".join(taken) + ". Is another `openloop up` running (`openloop status`)? Stop it, "
            "or choose other ports (OPENLOOP_TEMPORAL_ADDRESS, OPENLOOP_TEMPORAL_UI_PORT, "
            "OPENLOOP_HTTP_ADDRESS)."
        )
    stack = Stack(settings, console)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stack.stopping.set)
    wrote_stack_file = False
    # Held from now on, so nothing can take the HTTP port while the other parts start.
    http_socket = listen_socket(settings.http_host, settings.http_port)
    try:
        with console.status("Starting OpenLoop…") as status:

            def progress(text: str) -> None:
                status.update(f"{text}…")
                console.log(text)

            await asyncio.to_thread(stack.start_services, progress)
            progress("applying database migrations")
            applied = await apply_migrations_async(stack.database_url)
            if applied:
                console.log(f"applied {', '.join(applied)}")
            settings = settings.model_copy(update={"database_url": stack.database_url})
            examples = await apply_examples_on_first_run(stack.database_url)
            if examples:
                console.log(f"applied example agents: {', '.join(examples)}")
            await report_model_keys(stack.database_url)
            progress("connecting the worker")
            client = await connect(settings)
            await _ensure_schedules(client, settings)
            await apply_playbooks_at_start(client, settings, stack.database_url, console)
            worker = build_worker(client, settings)
            _, loop_workers = build_loop_workers(client, settings)
            server = uvicorn.Server(
                uvicorn.Config(
                    create_app(settings, client),
                    host=settings.http_host,
                    port=settings.http_port,
                    log_level="warning",
                    lifespan="on",
                )
            )
            # The loop's signal handlers decide shutdown; uvicorn's own would raise the signal
            # again once it stopped, and that KeyboardInterrupt tore down its lifespan mid-way.
            server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
        async with worker, loop_workers[0], loop_workers[1]:
            # SIGINT/SIGTERM reach the loop's handlers above: `stopping` decides shutdown.
            serve = asyncio.create_task(_serve(server, http_socket, settings.http_address))
            await _until_serving(server, serve)
            write_stack_file(
                settings.state_dir,
                {
                    "database_url": stack.database_url,
                    "temporal_address": settings.temporal_address,
                    "web_ui": stack.ui_url,
                    "http": f"http://{settings.http_address}",
                },
            )
            wrote_stack_file = True
            _print_up(console, settings, stack)
            ready = on_ready(stack) if on_ready is not None else None
            if asyncio.iscoroutine(ready):
                ready = asyncio.ensure_future(ready)
            stopping = asyncio.create_task(stack.stopping.wait())
            await asyncio.wait({stopping, serve}, return_when=asyncio.FIRST_COMPLETED)
            console.log("stopping…")
            await _cancel(ready)  # the demo follows a task through Temporal: stop it first
            stopping.cancel()
            server.should_exit = True
            await serve
    finally:
        http_socket.close()
        await close_pools()
        await asyncio.to_thread(stack.stop_services)
        if wrote_stack_file:
            with contextlib.suppress(OSError):
                (settings.state_dir / "stack.json").unlink()
        console.log("stopped")


async def _serve(server: uvicorn.Server, sock: socket.socket, address: str) -> None:
    """uvicorn exits the process when it cannot start; here that is an error to clean up after."""
    try:
        await server.serve(sockets=[sock])
    except SystemExit:
        raise RuntimeError(f"the HTTP server could not start on {address}; see the log above") from None


async def _until_serving(server: uvicorn.Server, serve: asyncio.Task[None]) -> None:
    while not server.started:
        if serve.done():
            serve.result()  # its error, if it has one
            raise RuntimeError("the HTTP server stopped before it started")
        await asyncio.sleep(0.05)


async def _cancel(running: object) -> None:
    if isinstance(running, asyncio.Future) and not running.done():
        running.cancel()
    if isinstance(running, asyncio.Future):
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await running


def _print_up(console: Console, settings: Settings, stack: Stack) -> None:
    postgres_where = f"embedded, data in {settings.state_dir / 'pg'}" if stack.postgres else "external"
    ask = commands('openloop ask helper "remember that we chose Postgres 16 for the ledger"')
    console.print(
        f"[bold green]OpenLoop is up.[/]\n"
        f"  Temporal   {settings.temporal_address} (namespace {settings.namespace})\n"
        f"  Web UI     {stack.ui_url}\n"
        f"  HTTP       http://{settings.http_address}  (/healthz, /readyz, /slack/events, …)\n"
        f"  Postgres   {postgres_where}"
    )
    # One-time sign-in link for the dashboard, as the local operator (an admin); never logged.
    operator = os.environ.get("OPENLOOP_USER") or "cli:local"
    dashboard = login_url(settings, operator, "admin")
    console.print(f"  Dashboard  {dashboard}", soft_wrap=True, markup=False, highlight=False)
    console.print(f"Try: [bold]{escape(ask)}[/]\nStop with Ctrl-C.")


async def apply_playbooks_at_start(
    client: Client, settings: Settings, database_url: str, console: Console
) -> bool | None:
    """A `./playbooks` folder where `up` runs is compiled and applied, as `openloop playbooks
    apply` does; a problem is reported and the stack starts without it. None: no folder."""
    # Imported here: the CLI's apply, said on this console; most stacks have no folder.
    from surfaces.cli.playbook_runs import apply_folder
    from surfaces.cli.playbooks import DEFAULT_DIR as PLAYBOOKS_DIR

    if not await asyncio.to_thread(PLAYBOOKS_DIR.is_dir):
        return None

    console.log(f"applying the playbooks in ./{PLAYBOOKS_DIR}")
    try:
        pool = await get_pool(database_url)
        applied = await apply_folder(
            pool, client, PLAYBOOKS_DIR, settings.task_queue, applied_by="openloop up", out=console
        )
    except Exception as exc:  # noqa: BLE001 - the stack runs without them; say why
        console.print(f"[red]./{PLAYBOOKS_DIR} was not applied:[/] {escape(str(exc))}")
        applied = False
    if not applied:
        console.print(f"the stack runs without them: fix, then {commands('openloop playbooks apply')}")
    return applied


async def _ensure_schedules(client: object, settings: Settings) -> None:
    from workers.schedules import ensure_retention_schedule

    await ensure_retention_schedule(client, settings.task_queue)  # type: ignore[arg-type]
