"""A server's tool listing, reused across tasks for `OPENLOOP_MCP_LISTING_TTL_S`.

Keyed like the sessions (address, transport, credentials hash): another credential may be
shown other tools. A listing is dropped when a call to its server fails or returns an error,
and when a call's schema check does not match it (the call then lists afresh).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

from mcp import Client

from activities.mcp.reuse_settings import reuse_settings
from activities.mcp.sessions import session_key, sessions
from config.mcp import McpServer

MAX_PAGES = 20


class Listings:
    def __init__(self, ttl_seconds: float) -> None:
        self.ttl_seconds = ttl_seconds
        self.fresh: dict[str, tuple[float, list[Any]]] = {}

    def reused(self, server: McpServer) -> list[Any] | None:
        """The server's tools from a listing still within its TTL; None when it must be listed."""
        found = self.fresh.get(session_key(server))
        if found is not None and time.monotonic() - found[0] < self.ttl_seconds:
            return found[1]
        return None

    async def tools(self, server: McpServer, *, refresh: bool = False) -> tuple[list[Any], bool]:
        """The server's tools, and whether they came from a reused listing."""
        found = None if refresh else self.reused(server)
        if found is not None:
            return found, True
        key = session_key(server)
        self.fresh.pop(key, None)
        listed = await sessions().run(server, _listing, repeatable=True)
        if self.ttl_seconds > 0:
            self.fresh[key] = (time.monotonic(), listed)
        return listed, False

    def forget(self, server: McpServer) -> None:
        self.fresh.pop(session_key(server), None)


async def _listing(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Listings] = weakref.WeakKeyDictionary()


def listings() -> Listings:
    loop = asyncio.get_running_loop()
    found = _by_loop.get(loop)
    if found is None:
        found = _by_loop[loop] = Listings(reuse_settings().listing_ttl_seconds)
    return found


def forget_listings() -> None:
    """Drop every reused listing of this loop (the worker stopping)."""
    _by_loop.pop(asyncio.get_running_loop(), None)
