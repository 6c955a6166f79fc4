"""Heartbeating while an activity waits on something slow (an MCP server, a provider).

The interval derives from the heartbeat timeout the workflow configured, beating at half of
it as temporalio's contrib/openai_agents `auto_heartbeater` does, so one late beat is not a
missed timeout. An activity scheduled without a heartbeat timeout does not beat: nothing
would read it. A worker that dies stops beating, and Temporal retries the attempt elsewhere
once the timeout passes, instead of after the whole start-to-close timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from temporalio import activity


@contextlib.asynccontextmanager
async def beating(what: str) -> AsyncIterator[None]:
    """Heartbeat (with `what` and the seconds waited so far) until the block ends; outside an
    activity (a bench calling the body directly) there is nobody to beat to."""
    timeout = activity.info().heartbeat_timeout if activity.in_activity() else None
    if not timeout:
        yield
        return
    every = timeout.total_seconds() / 2
    started = time.monotonic()

    async def beat() -> None:
        while True:
            activity.heartbeat({"waiting_for": what, "elapsed_s": round(time.monotonic() - started, 1)})
            await asyncio.sleep(every)

    task = asyncio.create_task(beat(), name=f"heartbeat: {what}")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
