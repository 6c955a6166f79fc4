"""MCP tools in the workflow, on the time-skipping server: listed once at the task's start,
kept across continue-as-new, gated like native tools."""

from __future__ import annotations

import uuid

from temporalio.testing import WorkflowEnvironment

from config.loader import parse_agent
from tests.helpers import approve_when_pending
from tests.workflow.record_histories import MCP_YAML, _mcp_tools
from tests.workflow.task_env import start, worker
from workflows.types import SurfaceContext, TaskInput, TaskStatus


async def test_tools_listed_at_the_start_survive_continue_as_new_and_writes_wait_for_approval(
    ts_env: WorkflowEnvironment, task_queue: str
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
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, inp, task_queue)
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
