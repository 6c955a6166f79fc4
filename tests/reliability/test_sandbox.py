"""The workflow sandbox, configured as the worker configures it (`workers.sandbox`).

Workflow code that reads the clock, draws random numbers, makes a uuid or does I/O is
rejected: its workflow task fails (and is retried, visibly, until the code is fixed) and
the workflow never completes. Temporal's deterministic replacements are accepted. And the
project's own workflow modules really run inside the sandbox: a module passed through is
the worker process's own copy, where none of these checks apply.
"""

from __future__ import annotations

import asyncio
import random
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

import workflows.agent_budget
import workflows.agent_task
import workflows.approvals
import workflows.conversation
import workflows.delegation
import workflows.human_waits
import workflows.mcp_tools
import workflows.model_caller
import workflows.retention
import workflows.task_record
import workflows.tool_dispatch
import workflows.tool_runner
import workflows.tools.agents
import workflows.usage_meter
import workflows.workflow_tool
from workers.sandbox import workflow_runner


@workflow.defn(name="rel.ReadsTheClock")
class ReadsTheClock:
    @workflow.run
    async def run(self) -> str:
        return datetime.now().isoformat()


@workflow.defn(name="rel.ReadsTimeTime")
class ReadsTimeTime:
    @workflow.run
    async def run(self) -> float:
        return time.time()


@workflow.defn(name="rel.DrawsRandom")
class DrawsRandom:
    @workflow.run
    async def run(self) -> float:
        return random.random()


@workflow.defn(name="rel.MakesUuid")
class MakesUuid:
    @workflow.run
    async def run(self) -> str:
        return str(uuid.uuid4())


@workflow.defn(name="rel.ReadsAFile")
class ReadsAFile:
    @workflow.run
    async def run(self) -> str:
        with open(__file__) as source:  # noqa: ASYNC230 - the point of the probe
            return source.readline()


@workflow.defn(name="rel.OpensASocket")
class OpensASocket:
    @workflow.run
    async def run(self) -> str:
        socket.create_connection(("127.0.0.1", 9), timeout=0.1).close()
        return "connected"


@workflow.defn(name="rel.Deterministic")
class Deterministic:
    """The same needs, met the deterministic way: this one completes."""

    @workflow.run
    async def run(self) -> str:
        return f"{workflow.now().isoformat()} {workflow.random().random()} {workflow.uuid4()}"


@workflow.defn(name="rel.SharedModules")
class SharedModules:
    """Which of the given modules are the very objects the worker process holds."""

    @workflow.run
    async def run(self, host_ids: dict[str, int]) -> list[str]:
        return sorted(name for name, ident in host_ids.items() if id(sys.modules.get(name)) == ident)


FORBIDDEN = [ReadsTheClock, ReadsTimeTime, DrawsRandom, MakesUuid, ReadsAFile, OpensASocket]


async def first_task_failure(client: Client, workflow_id: str) -> str:
    """The message of the workflow's first failed workflow task (waits for it)."""
    for _ in range(200):
        async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
            assert event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, workflow_id
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                return str(event.workflow_task_failed_event_attributes.failure.message)
        await asyncio.sleep(0.05)
    raise AssertionError(f"{workflow_id}: no workflow task failed")


@pytest.fixture(scope="module")
async def sandbox_queue(client: Client) -> AsyncIterator[str]:
    """One worker, sandboxed like production, running every probe of this module."""
    task_queue = f"tq-sandbox-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[*FORBIDDEN, Deterministic, SharedModules],
        workflow_runner=workflow_runner(),
    ):
        yield task_queue


@pytest.mark.parametrize("probe", FORBIDDEN, ids=[p.__name__ for p in FORBIDDEN])
async def test_nondeterministic_workflow_code_is_rejected(
    client: Client, sandbox_queue: str, probe: type
) -> None:
    workflow_id = f"rel-sandbox-{uuid.uuid4().hex[:10]}"
    handle = await client.start_workflow(
        probe.run,  # type: ignore[attr-defined]
        id=workflow_id,
        task_queue=sandbox_queue,
        execution_timeout=timedelta(minutes=1),
    )
    try:
        message = await first_task_failure(client, workflow_id)
    finally:
        await handle.terminate("sandbox test over")
    assert "Cannot access" in message, message
    control = await client.execute_workflow(
        Deterministic.run, id=f"{workflow_id}-ok", task_queue=sandbox_queue
    )
    assert control.count(" ") == 2


async def test_the_project_workflow_modules_run_inside_the_sandbox(
    client: Client, sandbox_queue: str
) -> None:
    # The worker process's own module objects; a sandboxed module is a fresh copy per run.
    sandboxed = [
        workflows.agent_task,
        workflows.task_record,
        workflows.usage_meter,
        workflows.conversation,
        workflows.tool_runner,
        workflows.tool_dispatch,
        workflows.mcp_tools,
        workflows.workflow_tool,
        workflows.tools.agents,
        workflows.delegation,
        workflows.model_caller,
        workflows.human_waits,
        workflows.approvals,
        workflows.agent_budget,
        workflows.retention,
    ]
    names = [module.__name__ for module in sandboxed]
    host_ids = {name: id(sys.modules[name]) for name in [*names, "workflows.types"]}
    shared = await client.execute_workflow(
        SharedModules.run, host_ids, id=f"rel-modules-{uuid.uuid4().hex[:10]}", task_queue=sandbox_queue
    )
    assert "workflows.types" in shared  # the probe sees pass-through where it is meant to be
    leaked = [name for name in names if name in shared]
    assert leaked == [], (
        f"{leaked} run with the worker's own imports, outside the sandbox: datetime.now(), "
        "random or I/O there would not be caught"
    )
