"""What activities share within one worker process: settings and the database pool.

Set once when the worker starts (`configure`); activities read secrets from here, never
from their inputs, because inputs are workflow history and history is visible in the Web UI.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from activities.store.db import get_pool
from config.settings import Settings


@dataclass
class Runtime:
    settings: Settings

    async def pool(self) -> AsyncConnectionPool:
        return await get_pool(self.settings.require_database_url())


_runtime: Runtime | None = None


def configure(settings: Settings) -> Runtime:
    global _runtime
    _runtime = Runtime(settings)
    return _runtime


def runtime() -> Runtime:
    if _runtime is None:
        return configure(Settings.from_env())
    return _runtime
