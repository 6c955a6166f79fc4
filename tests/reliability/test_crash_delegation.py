"""A worker SIGKILLed while three subagents are asking the model: a second worker takes the
tree over, no child workflow is started twice (their ids derive from the parent's id and
the step, so the parent's replayed step finds the children it started), every child
finishes, and the parent resumes on the new worker and answers with what they found.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import eventually_async
from tests.reliability.harness import (
    FAKE_OPENAI_KEY,
    WorkerForker,
    agent_config,
    start,
    stored,
    worker_env,
)
from workers.embedded import TemporalDevServer
from workers.history import replay
from workflows.types import TaskStatus

E = EventType
CHILDREN = 3


async def runs_of(client: Client, workflow_id: str) -> int:
    return len([run async for run in client.list_workflows(f"WorkflowId = '{workflow_id}'")])


async def test_worker_killed_while_children_run_starts_no_child_twice_and_the_parent_finishes(
    client: Client,
    dev_server: TemporalDevServer,
    pg_url: str,
    task_queue: str,
    tmp_path: Path,
    forker: WorkerForker,
) -> None:
    fake = FakeModelAPI().start()
    fake.answer_tool_calls(
        [tool_call(f"c{n}", "agent__delegate", {"task": f"look into part {n}"}) for n in range(CHILDREN)]
    )
    for _ in range(CHILDREN):
        fake.answer("An answer nobody receives.", delay=30)  # held until the worker is dead
    for _ in range(CHILDREN):
        fake.answer("Found it.")
    fake.answer("Put together: all three parts are fine.")
    env = worker_env(
        dev_server.address,
        pg_url,
        task_queue,
        tmp_path,
        OPENLOOP_MODEL_API_BASE=fake.base_url,
        OPENAI_API_KEY=FAKE_OPENAI_KEY,
    )
    first = await forker.spawn("first", env, tmp_path)
    second = None
    try:
        await first.ready()
        tools = [{"name": "agent.delegate", "permissions": ["agents:delegate"]}]
        agent = await stored(pg_url, agent_config(tools=tools, budget={"per_task_usd": 1.0}))
        handle = await start(client, task_queue, agent, "Check the three parts.")
        await eventually_async(lambda: len(fake.requests) == 1 + CHILDREN, "every child to ask the model", 60)
        await first.kill()
        second = await forker.spawn("second", env, tmp_path)
        result = await asyncio.wait_for(handle.result(), 90)

        assert result.status == TaskStatus.SUCCESS, result.reason
        assert result.reply == "Put together: all three parts are fine."
        assert len(fake.requests) == 1 + 2 * CHILDREN + 1  # each child asked again, once
        history = await handle.fetch_history()
        started = [
            e.start_child_workflow_execution_initiated_event_attributes.workflow_id
            for e in history.events
            if e.event_type == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
        ]
        assert len(started) == CHILDREN == len(set(started))
        assert all(child.startswith(f"{handle.id}-d1-") for child in started)
        assert not any(
            e.event_type == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED for e in history.events
        )
        completed = [
            e for e in history.events if e.event_type == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
        ]
        assert len(completed) == CHILDREN
        for child in started:
            await eventually_async(lambda child=child: runs_of(client, child), f"{child} to be listed", 30)
            assert await runs_of(client, child) == 1  # one execution per child id, ever
        # The parent's later workflow tasks ran on the second worker.
        identities = [
            e.workflow_task_started_event_attributes.identity
            for e in history.events
            if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_STARTED
        ]
        assert identities[-1].startswith(f"{second.pid}@"), identities
        assert any(identity.startswith(f"{first.pid}@") for identity in identities)
        [report] = await replay([history])
        assert report.ok, report.error
    finally:
        for worker in (first, second):
            if worker is not None:
                await worker.kill()
        fake.stop()
