"""A local aiohttp server on 127.0.0.1, on its own event loop in its own thread: what every
fake service needs to be reached by real clients from synchronous tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web


class ThreadServer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.port = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def start(self, app: Callable[[], web.Application]) -> None:
        """Serve the application `app()` builds (inside the server's loop) on a free port."""
        ready = threading.Event()

        def serve() -> None:
            self.loop = asyncio.new_event_loop()
            self.loop.run_until_complete(self._start_site(app()))
            ready.set()
            self.loop.run_forever()

        self._thread = threading.Thread(target=serve, name=self.name, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.name} did not start")

    async def _start_site(self, app: web.Application) -> None:
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self, before: Callable[[], Awaitable[None]] | None = None) -> None:
        """Stop serving (after `before()`, run in the server's loop); a second stop does nothing."""
        if self.loop is None:
            return

        async def shutdown() -> None:
            if before is not None:
                await before()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self.loop = None

    def run(self, work: Awaitable[Any], timeout: float = 10) -> Any:
        """Run `work` in the server's loop and wait for its result."""
        assert self.loop is not None, f"start {self.name} first"
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)  # type: ignore[arg-type]
