"""How the `tasks`, `explain` and `replay` commands run: one command against Temporal, its
errors one line on stderr and an exit code (0 ok, 1 failed, 2 Temporal unreachable or bad input).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer
from rich.console import Console
from temporalio.client import Client

from config.settings import Settings
from surfaces.cli.errors import say
from surfaces.cli.terminal import make_console
from surfaces.client import connect
from surfaces.task_lookup import TaskNotFound

T = TypeVar("T")

EXIT_FAILED = 1
EXIT_UNAVAILABLE = 2


class Fail(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def output() -> Console:
    return make_console()


def run(work: Callable[[Settings, Client | None], Awaitable[T]], *, needs_client: bool = True) -> T:
    """Run one command against Temporal; errors become one line on stderr and an exit code."""

    async def main() -> T:
        settings = Settings.from_env()
        client = await connect(settings) if needs_client else None
        return await work(settings, client)

    try:
        return asyncio.run(main())
    except (Fail, TaskNotFound, RuntimeError) as exc:  # connect() says how to reach Temporal
        say(str(exc))
        code = EXIT_FAILED if isinstance(exc, TaskNotFound) else EXIT_UNAVAILABLE
        raise typer.Exit(exc.code if isinstance(exc, Fail) else code) from None
