"""The surfaces server: one ASGI app (FastAPI) that Slack, GitHub and operators talk to.

Each surface exposes `register(app)`; handlers only validate, record, start or signal
workflows, and acknowledge. No agent logic runs here, and no body is read unbounded
(`surfaces.limits`). A surface that does work after the ack (the Slack inbox) adds a
background runner, which lives as long as the app's lifespan.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from temporalio.client import Client

from config.settings import Settings

log = logging.getLogger("openloop.surfaces")

BackgroundRunner = Callable[[asyncio.Event], Awaitable[None]]
STOP_GRACE_SECONDS = 10.0


def create_app(settings: Settings, client: Client | None) -> FastAPI:
    app = FastAPI(title="OpenLoop surfaces", version="0.1.0", lifespan=_run_background)
    app.state.settings = settings
    app.state.temporal = client
    app.state.background = []

    from surfaces import health, limits, web

    limits.register(app)  # first, so the dashboard's security headers wrap its 413s too
    health.register(app)
    web.register(app)
    for module_name in (
        "surfaces.slack.events",
        "surfaces.github.webhooks",
        "surfaces.ledger",
        "surfaces.hooks",
    ):
        _register_optional(app, module_name)
    return app


def add_background(app: FastAPI, runner: BackgroundRunner) -> None:
    """Run `runner(stop)` while the app serves; `stop` is set at shutdown."""
    app.state.background.append(runner)


@asynccontextmanager
async def _run_background(app: FastAPI) -> AsyncIterator[None]:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(runner(stop)) for runner in app.state.background]
    try:
        yield
    finally:
        stop.set()
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=STOP_GRACE_SECONDS)
            for task in pending:
                task.cancel()
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.error("background runner failed", exc_info=task.exception())


def _register_optional(app: FastAPI, module_name: str) -> None:
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            return
        raise
    module.register(app)
