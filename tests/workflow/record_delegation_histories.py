"""Record a delegation history into tests/workflow/histories/ (the replay gate).

Run by hand after a deliberate, replay-safe change to delegation, then commit the JSON:

    python -m tests.workflow.record_delegation_histories

The real stack: the embedded Postgres, the Temporal dev server, the production worker with
every real activity, LiteLLM's real client talking to the local fake OpenAI-compatible API.
The scenario: a parent delegates two pieces in one answer; both subagents run in parallel,
each asks to save a memory (gated), tells its parent it waits for that approval, is
approved, and answers; the parent sums up. Recorded: the parent (`delegation.json`) and
one subagent (`delegation_subagent.json`), whose history has the signals to its parent.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from activities.llm.providers import API_BASE_ENV
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.tasks import start_task
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import approve_when_pending
from tests.workflow.record_loop_histories import HISTORIES, real_stack
from workers.history import fetch_history, write_history
from workers.worker import build_worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskResult, TaskStatus

MODEL = "openai/gpt-4o-mini"
APPROVER = "cli:local"
CHILDREN = 2


def lead_agent() -> AgentConfig:
    return AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": "lead"},
            "spec": {
                "model_policy": {"default": MODEL, "max_output_tokens": 256},
                "tools": [
                    {"name": "agent.delegate", "permissions": ["agents:delegate"]},
                    {"name": "memory.save", "permissions": ["memory:write"]},
                ],
                "approvals": {"require_for": ["memory.save"], "approvers": [APPROVER]},
                "budget": {"per_task_usd": 1.0},
            },
        }
    )


def script(fake: FakeModelAPI) -> None:
    """Both subagents get the same answers at each stage, so their order does not matter."""
    fake.answer_tool_calls(
        [
            tool_call(f"d{n}", "agent__delegate", {"task": f"Note the decision about part {n}."})
            for n in range(CHILDREN)
        ]
    )
    for _ in range(CHILDREN):
        fake.answer_tool_calls([tool_call("s1", "memory__save", {"content": "We deploy on Tuesdays."})])
    for _ in range(CHILDREN):
        fake.answer("Saved the decision.")
    fake.answer("Both parts are noted.")


async def delegation(client: Client, pg_url: str, folder: Path) -> None:
    fake = FakeModelAPI().start()
    os.environ[API_BASE_ENV] = fake.base_url
    os.environ.setdefault("OPENAI_API_KEY", "sk-record")
    script(fake)
    settings = Settings(
        database_url=pg_url, state_dir=folder / "state", task_queue=f"tq-{uuid.uuid4().hex[:8]}"
    )
    agent, _ = await apply_agent(await get_pool(pg_url), lead_agent())
    context = SurfaceContext(surface="cli", channel="record", user=APPROVER)
    try:
        async with build_worker(client, settings):
            handle, _ = await start_task(
                client, settings, agent, context, "Note both decisions.", task_id="task-record-delegation"
            )
            children = await _children(client, handle.id)
            for child in children:
                await approve_when_pending(
                    client.get_workflow_handle_for(AgentTaskWorkflow.run, child), APPROVER
                )
            result: TaskResult = await handle.result()
            assert result.status == TaskStatus.SUCCESS, result.reason
            parent = await fetch_history(client, handle.id)
            write_history(parent, HISTORIES / "delegation.json")
            print(f"recorded delegation: {result.status}, {len(parent.events)} events")
            child = await fetch_history(client, children[0])
            write_history(child, HISTORIES / "delegation_subagent.json")
            print(f"recorded delegation_subagent: {len(child.events)} events")
    finally:
        fake.stop()


async def _children(client: Client, parent_id: str) -> list[str]:
    """The subagents the parent started, once it started them all."""
    for _ in range(600):
        history = await fetch_history(client, parent_id)
        ids = [
            e.start_child_workflow_execution_initiated_event_attributes.workflow_id
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
        ]
        if len(ids) == CHILDREN:
            return sorted(ids)
        await asyncio.sleep(0.1)
    raise AssertionError(f"{parent_id} never started {CHILDREN} subagents")


async def record() -> None:
    async with real_stack() as (client, pg_url, root):
        await delegation(client, pg_url, root)


if __name__ == "__main__":
    asyncio.run(record())
