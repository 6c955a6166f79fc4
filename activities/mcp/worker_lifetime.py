"""The worker process's MCP sessions and listings live while a worker in it runs.

Closed when the last worker of the process stops (a process may run two: a loop worker's
second one), so no MCP server is left with a session, or a stdio server process, that
nobody will use again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from activities.mcp.listings import forget_listings
from activities.mcp.reuse_settings import reuse_settings
from activities.mcp.sessions import close_sessions

_running: dict[asyncio.AbstractEventLoop, int] = {}


@contextlib.asynccontextmanager
async def mcp_sessions_held() -> AsyncIterator[None]:
    """Around a worker's run (or a command's work): the last one to stop closes the sessions.
    A bad setting stops the worker at its start, not its first MCP call."""
    reuse_settings()
    loop = asyncio.get_running_loop()
    _running[loop] = _running.get(loop, 0) + 1
    try:
        yield
    finally:
        _running[loop] -= 1
        if not _running[loop]:
            del _running[loop]
            forget_listings()
            await close_sessions()
