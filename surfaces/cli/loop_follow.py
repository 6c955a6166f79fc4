"""Following a running loop: its progress query, the running command's heartbeat, and the
live view `openloop loops run` and `loops status --follow` show until the loop ends."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.console import Console
from rich.live import Live
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from surfaces.cli.loop_views import ending, running_line
from workflows.loop_types import LoopResult, LoopStatus, LoopView

EXIT_LOOP_FAILED = 1


async def heartbeat(client: Client, handle: WorkflowHandle[Any, Any]) -> dict[str, Any] | None:
    """The running command's latest heartbeat (pid, elapsed, output, ETA), if any."""
    description = await handle.describe()
    for pending in description.raw_description.pending_activities:
        if pending.heartbeat_details.payloads:
            [details] = await client.data_converter.decode(pending.heartbeat_details.payloads)
            if isinstance(details, dict):
                return details
    return None


async def progress_view(handle: WorkflowHandle[Any, Any]) -> LoopView | None:
    try:
        return await handle.query("progress", result_type=LoopView | None)  # type: ignore[arg-type]
    except RPCError:
        return None


async def follow(client: Client, handle: WorkflowHandle[Any, Any], console: Console) -> int:
    """Show the loop live until it ends; its exit code (0 only for SUCCESS). Ctrl-C stops
    following, never the loop."""
    result_task = asyncio.ensure_future(handle.result())
    shown = 0
    try:
        with Live(running_line(None, None), console=console, refresh_per_second=4, transient=True) as live:
            while not result_task.done():
                view = await progress_view(handle)
                if view is not None:
                    live.update(running_line(view, await heartbeat(client, handle)))
                    for verdict in view.verdicts[shown:]:
                        shown += 1
                        live.console.print(f"round {shown}: {verdict.value}")
                await asyncio.wait({result_task}, timeout=1.0)
    except KeyboardInterrupt:
        console.print(f"stopped following; the loop goes on: openloop loops status {handle.id}")
        return 0
    result: LoopResult = result_task.result()
    final = await progress_view(handle)
    for number, verdict in enumerate(final.verdicts if final else [], start=1):
        if number > shown:
            console.print(f"round {number}: {verdict.value}")
    for line in ending(result.status.value, result.reason, result.next_action):
        console.print(line)
    console.print(f"reports: openloop loops report {handle.id}")
    return 0 if result.status is LoopStatus.SUCCESS else EXIT_LOOP_FAILED
