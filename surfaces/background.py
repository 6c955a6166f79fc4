"""Work a surface does after its ack (the Slack inbox): runners that live as long as the app.

A surface's `register(app)` adds a runner with `add_background`; the app's lifespan
(`run_background`) starts every runner when serving begins and, at shutdown, sets their
`stop` event and waits `STOP_GRACE_SECONDS` before cancelling what is left.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

log = logging.getLogger("openloop.surfaces")

BackgroundRunner = Callable[[asyncio.Event], Awaitable[None]]
STOP_GRACE_SECONDS = 10.0


def add_background(app: FastAPI, runner: BackgroundRunner) -> None:
    """Run `runner(stop)` while the app serves; `stop` is set at shutdown."""
    app.state.background.append(runner)


@asynccontextmanager
async def run_background(app: FastAPI) -> AsyncIterator[None]:
    """The app's lifespan: every added runner runs while it serves."""
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
