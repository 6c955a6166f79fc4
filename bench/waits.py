"""Waiting on the benches' database counts: poll a count until it reaches a target, or act on
items a window at a time, and fail (not hang) when the count stops moving."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from psycopg.rows import dict_row

from activities.runtime import runtime

TICK_S = 0.25
STALL_S = 300.0  # a wait whose count has not moved for this long has failed


async def count(sql: str, *params: object) -> int:
    pool = await runtime().pool()
    async with pool.connection() as conn:
        cursor = conn.cursor(row_factory=dict_row)
        row = await (await cursor.execute(sql, params)).fetchone()
    return int(row["n"]) if row else 0


class Progress:
    """Fails a wait that stops moving: a task that never parks (or never finishes) must end
    the bench with an error naming the phase, not hang it."""

    def __init__(self, what: str, target: int) -> None:
        self.what, self.target = what, target
        self.done, self.moved = -1, time.monotonic()

    def saw(self, done: int) -> None:
        now = time.monotonic()
        if done != self.done:
            self.done, self.moved = done, now
        elif now - self.moved > STALL_S:
            raise TimeoutError(
                f"{self.what}: stuck at {done} of {self.target} for {STALL_S:.0f}s "
                "(see the worker log under the stack's state dir)"
            )


async def wait_for(what: str, sql: str, prefix: str, target: int) -> float:
    """Poll until `sql` (with the task id prefix) counts `target`; returns the seconds it took."""
    began, progress = time.monotonic(), Progress(what, target)
    while (done := await count(sql, prefix + "%")) < target:
        progress.saw(done)
        await asyncio.sleep(1.0)
    return time.monotonic() - began


async def windowed(
    items: list[str], window: int, done: Callable[[], Awaitable[int]], act: Callable[[str], Awaitable[None]]
) -> None:
    """`act` on every item, with at most `window` acted on and not yet counted by `done`."""
    issued, base = 0, await done()
    progress = Progress(f"windowed {getattr(act, '__name__', 'act')}", len(items))
    while issued < len(items):
        counted = await done() - base
        progress.saw(counted)
        room = window - (issued - counted)
        if room > 0:
            batch = items[issued : issued + room]
            await asyncio.gather(*(act(item) for item in batch))
            issued += len(batch)
        await asyncio.sleep(TICK_S)
