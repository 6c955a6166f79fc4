"""`openloop` commands run as a user runs them, for the tests of what they show: CliRunner in a
thread (so each command gets its own event loop), pointed at the dev server by
OPENLOOP_TEMPORAL_ADDRESS."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from typer.testing import CliRunner, Result

from surfaces.cli.main import app


@dataclass
class Cli:
    address: str

    async def __call__(self, *args: str) -> Result:
        env = {
            "OPENLOOP_TEMPORAL_ADDRESS": self.address,
            "OPENLOOP_TEMPORAL_UI_PORT": "8233",
            "COLUMNS": "250",
        }
        return await asyncio.to_thread(lambda: CliRunner().invoke(app, list(args), env=env))

    async def until(self, expected: str, *args: str) -> Result:
        """Visibility is eventually consistent: retry a listing until it shows `expected`."""
        for _ in range(50):
            result = await self(*args)
            if expected in result.output:
                return result
            await asyncio.sleep(0.2)
        raise AssertionError(f"{expected!r} never showed in:\n{result.output}")
