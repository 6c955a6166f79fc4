"""A deploy's SIGTERM at a chosen moment of each kind of run, on real worker processes (two
agent workers and a loop worker, `openloop worker [--loops]`, as `bench.chaos_world` starts
them): every worker of the role doing the work is stopped the way Kubernetes stops a pod,
and replacements start. The run goes on on them, ends as it would have, and does each side
effect once. Mid model call, waiting for an approval, mid MCP call, with subagents asking
the model, a repair loop's command that outlasts the grace period, a coding task's tests.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from temporalio.client import WorkflowHandle

from activities.store import loops as loop_store
from activities.store.db import get_pool
from bench.chaos_plans import APPROVER, request, respond
from bench.chaos_world import REPO, ChaosWorld, chaos_world
from surfaces.tasks import start_task
from tests.reliability.harness import scalar
from workflows.agent_task import AgentTaskWorkflow
from workflows.loop_types import LOOP_WORKFLOW_NAME, LoopActivity, LoopResult, LoopStatus
from workflows.types import ApprovalDecision, SurfaceContext, TaskResult, TaskStatus

AGENTS = ("agents-1", "agents-2")
LOOPS = ("loops-1",)
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ChaosWorld]:
    async with chaos_world(tmp_path_factory.mktemp("graceful"), "graceful") as started:
        yield started


async def deploy(world: ChaosWorld, role: tuple[str, ...]) -> None:
    """A rolling update of every worker of `role` at once: SIGTERM, then a new process each."""
    await asyncio.gather(*(world.stop_worker(name, signal.SIGTERM) for name in role))
    await asyncio.gather(*(world.ready(world.spawn(name)) for name in role))


async def begin(world: ChaosWorld, kind: str) -> tuple[str, WorkflowHandle[Any, Any]]:
    key = f"g{uuid.uuid4().hex[:6]}"
    context = SurfaceContext(surface="cli", channel="graceful", user=APPROVER)
    handle, _ = await start_task(
        world.client, world.settings, world.agent, context, request(kind, key), task_id=f"task-graceful-{key}"
    )
    return key, handle


async def until(what: str, ready: Callable[[], Any], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not await ready():
        assert time.monotonic() < deadline, f"never saw {what}"
        await asyncio.sleep(0.1)


def asked(world: ChaosWorld, key: str) -> int:
    return sum(1 for r in world.model.requests if f" {key}]" in str(r.body.get("messages")))


async def pending_activities(handle: WorkflowHandle[Any, Any]) -> list[str]:
    described = await handle.describe()
    return [a.activity_type.name for a in described.raw_description.pending_activities]


async def approve(handle: WorkflowHandle[Any, Any]) -> None:
    async def pending() -> bool:
        return (await handle.query(AgentTaskWorkflow.status)).pending_approval is not None

    await until("the approval request", pending)
    waiting = (await handle.query(AgentTaskWorkflow.status)).pending_approval
    assert waiting is not None
    await handle.signal(
        AgentTaskWorkflow.approve, ApprovalDecision(waiting.request_id, waiting.action_id, APPROVER)
    )


async def finished(handle: WorkflowHandle[Any, Any]) -> TaskResult:
    result: TaskResult = await asyncio.wait_for(handle.result(), 180)
    assert result.status == TaskStatus.SUCCESS, result.reason
    return result


async def test_mid_model_call(world: ChaosWorld) -> None:
    world.model.responder = respond(REPO, delay=4.0)  # answered within the grace period
    try:
        key, handle = await begin(world, "approval")

        async def asking() -> bool:
            return asked(world, key) == 1

        await until("the model asked", asking)
        await deploy(world, AGENTS)
        await approve(handle)
        await finished(handle)
    finally:
        world.model.responder = respond(REPO)
    assert asked(world, key) == 2  # the call cut by the stop was not asked again
    url = world.settings.require_database_url()
    assert await scalar(url, "SELECT count(*) FROM memories WHERE content = %s", f"chaos fact {key}") == 1


async def test_waiting_for_an_approval(world: ChaosWorld) -> None:
    key, handle = await begin(world, "issue")

    async def waiting() -> bool:
        return (await handle.query(AgentTaskWorkflow.status)).pending_approval is not None

    await until("the approval request", waiting)
    await deploy(world, AGENTS)
    await approve(handle)
    await finished(handle)
    assert [issue["title"] for issue in world.github.issues(REPO)].count(f"chaos {key}") == 1


async def test_mid_mcp_call(world: ChaosWorld) -> None:
    key, handle = await begin(world, "slowmcp")

    async def calling() -> bool:
        return "openloop.mcp.call_tool" in await pending_activities(handle)

    await until("the MCP call", calling)
    await deploy(world, AGENTS)
    result = await finished(handle)
    assert result.reply == f"Waited for the notes of {key}."


async def test_with_subagents_asking_the_model(world: ChaosWorld) -> None:
    world.model.responder = respond(REPO, delay=3.0)
    try:
        key, handle = await begin(world, "tree")

        async def children_asking() -> bool:
            return asked(world, f"{key}-1") >= 1 and asked(world, f"{key}-2") >= 1

        await until("both subagents asking", children_asking)
        await deploy(world, AGENTS)
        result = await finished(handle)
    finally:
        world.model.responder = respond(REPO)
    assert result.reply == f"Both parts of {key} checked."
    children = {w.id async for w in world.client.list_workflows(f"WorkflowId STARTS_WITH '{handle.id}-d'")}
    assert len(children) == 2  # none started twice


async def test_a_loop_command_longer_than_the_grace_period(world: ChaosWorld) -> None:
    key, handle = await begin(world, "slowloop")
    await finished(handle)
    loop_ids = [
        w.id
        async for w in world.client.list_workflows(
            f"WorkflowType = '{LOOP_WORKFLOW_NAME}' AND ExecutionStatus = 'Running'"
        )
    ]
    assert len(loop_ids) == 1, loop_ids
    loop = world.client.get_workflow_handle(loop_ids[0], result_type=LoopResult)

    async def commanding() -> bool:
        return LoopActivity.RUN_COMMAND in await pending_activities(loop)

    await until("the loop's command", commanding)
    await deploy(world, LOOPS)
    result = await asyncio.wait_for(loop.result(), 240)
    assert result.status is LoopStatus.SUCCESS, result
    history = (await loop.fetch_history()).to_json()
    assert "WorkerShutdown" in history  # the command was cut, and run again on the new worker
    rounds = await loop_store.reports(await get_pool(world.settings.require_database_url()), loop.id)
    notes = [report.note for report in rounds if "interrupted" in report.note]
    assert len(notes) == 1 and "interrupted by a worker shutdown; run again on a new workspace" in notes[0]
    assert notes[0].startswith(("round 1 verify", "round 1 fix", "round 2 verify", "round 2 fix")), notes
