"""MCP tools in the workflow: listed once at the task's start, kept across continue-as-new,
gated like native tools. On the dev server: nothing here waits on time, and the time-skipping
server's result wait across many continue-as-new runs has hung under load."""

from __future__ import annotations

import uuid

from temporalio.client import Client
from temporalio.worker import Worker

from config.loader import parse_agent
from tests.helpers import approve_when_pending
from tests.workflow.record_histories import MCP_YAML, _mcp_tools
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskInput, TaskStatus


async def test_tools_listed_at_the_start_survive_continue_as_new_and_writes_wait_for_approval(
    client: Client, task_queue: str
) -> None:
    script = _mcp_tools()
    inp = TaskInput(
        task_id=f"task-mcp-{uuid.uuid4().hex[:10]}",
        agent=parse_agent(MCP_YAML),
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="save the deploy note",
        max_steps_per_run=1,  # a new run before every step
    )
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=script.activities(),
        workflow_runner=workflow_runner(),
    ):
        handle = await client.start_workflow(
            AgentTaskWorkflow.run, inp, id=inp.task_id, task_queue=task_queue
        )
        pending = await approve_when_pending(handle, approver="U_ALICE")
        result = await handle.result()
    assert result.status == TaskStatus.SUCCESS
    assert pending.tool == "notes.create_note"
    # Every model call, in every run, was offered the tools listed once at the start.
    assert all({"notes.read_note", "notes.create_note"} <= set(i.offered_tools) for i in script.model_inputs)
    assert [(c.tool, c.call.arguments) for c in script.mcp_calls] == [
        ("read_note", {"name": "deploys"}),
        ("create_note", {"title": "Deploy on Tuesdays"}),
    ]
    assert script.mcp_calls[1].call.approval is not None
    assert script.mcp_calls[0].schema_sha256 == script.mcp_specs[0].sha256
