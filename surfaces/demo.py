"""`openloop up --demo`: one task end to end on the embedded stack, with the offline model.

It asks the `helper` example agent to remember a decision; the agent's config gates
`memory.save` behind an approval, so the demo shows recall, the approval wait, the tool and
the reply. In a terminal it asks you to approve; otherwise it prints how to.
"""

from __future__ import annotations

import sys
import uuid

from rich.console import Console

from activities.store.agents import get_agent
from activities.store.db import get_pool
from surfaces.cli.follow import follow_task
from surfaces.cli.terminal import commands
from surfaces.client import connect
from surfaces.tasks import start_task, task_id_for
from workflows.types import SurfaceContext

DEMO_REQUEST = "Please remember the decision: we chose Postgres 16 with pgvector for agent memory."


async def run_demo(stack: object, console: Console) -> None:
    settings = stack.settings.model_copy(update={"database_url": stack.database_url})  # type: ignore[attr-defined]
    pool = await get_pool(settings.require_database_url())
    agent = await get_agent(pool, "helper")
    if agent is None:
        console.print(
            "[red]The demo needs the `helper` agent: "
            + commands("openloop agents apply -f config/agents/minimal.yaml")
            + "[/]"
        )
        return
    client = await connect(settings)
    context = SurfaceContext(surface="cli", channel="cli", user="cli:local", event_id=uuid.uuid4().hex)
    handle, _ = await start_task(
        client,
        settings,
        agent,
        context,
        DEMO_REQUEST,
        task_id=task_id_for("cli", context.event_id or ""),
    )
    console.print(f"[bold]Demo task[/] {handle.id}: {DEMO_REQUEST}")
    await follow_task(
        handle, console, interactive=sys.stdin.isatty(), user="cli:local", database_url=settings.database_url
    )
    hint = commands('openloop ask helper "what did we decide?"')
    console.print(f"The stack stays up: try `{hint}`. Ctrl-C stops it.")
