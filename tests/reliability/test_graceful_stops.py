"""A deploy's SIGTERM at a chosen moment of each kind of run, on real worker processes (two
agent workers and a loop worker, `openloop worker [--loops]`, as `bench.chaos_world` starts
them): every worker of the role doing the work is stopped the way Kubernetes stops a pod,
and replacements start. The run goes on on them, ends as it would have, and does each side
effect once. Mid model call, mid streamed answer, waiting for an approval, mid native tool
(GitHub accepted the issue and has not answered), mid MCP call, with subagents asking the
model, a repair loop's command that outlasts the grace period, a coding task's command that
does, the pull request being opened, a playbook's steps running in parallel.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHandle

from activities.playbooks.starts import start_run
from activities.store import loops as loop_store
from activities.store.db import get_pool
from bench.chaos_plans import APPROVER, FAN, SLACK_CHANNEL, chaos_playbooks, request, respond
from bench.chaos_world import REPO, ChaosWorld, chaos_world
from surfaces.tasks import start_task
from tests.fakes.github_git import pull_requests
from tests.reliability.harness import scalar
from workflows.agent_task import AgentTaskWorkflow
from workflows.code_types import CodeActivity
from workflows.loop_types import LOOP_WORKFLOW_NAME, LoopActivity, LoopResult, LoopStatus
from workflows.playbook_types import PlaybookRunResult, PlaybookRunStatus
from workflows.types import ApprovalDecision, SurfaceContext, TaskResult, TaskStatus

AGENTS = ("agents-1", "agents-2")
SLOW = "sleep 15"  # the slow commands of the slow loop and coding plans
LOOPS = ("loops-1",)
# One world of worker processes for the module: its tests stay on one test worker.
pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("graceful-world")]


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ChaosWorld]:
    async with chaos_world(tmp_path_factory.mktemp("graceful"), "graceful") as started:
        yield started


async def deploy(world: ChaosWorld, role: tuple[str, ...]) -> None:
    """A rolling update of every worker of `role` at once, as `maxSurge` makes it: the old
    processes get SIGTERM and drain while their replacements start and begin polling."""
    stopping = [asyncio.create_task(world.stop_worker(name, signal.SIGTERM)) for name in role]
    await asyncio.sleep(0)  # each stop holds its old process before a new one takes the name
    fresh = [world.spawn(name) for name in role]
    await asyncio.gather(*stopping)
    assert world.left_running == [], "a stopped worker left its sandboxed commands running"
    await asyncio.gather(*(world.ready(worker) for worker in fresh))


def running_commands(text: str) -> list[int]:
    """The processes whose command line holds `text` (a sandboxed command and its shell)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and text in line:
            found.append(int(entry.name))
    return found


async def processes_of(command: str) -> list[int]:
    """The processes of `command` once it runs in its sandbox."""

    async def started() -> bool:
        return bool(running_commands(command))

    await until(f"{command!r} running", started)
    return running_commands(command)


async def begin(
    world: ChaosWorld, kind: str, context: SurfaceContext | None = None
) -> tuple[str, WorkflowHandle[Any, Any]]:
    key = f"g{uuid.uuid4().hex[:6]}"
    if kind == "slack":  # a mention in a thread of the fake Slack
        thread = world.slack.add_message(SLACK_CHANNEL, request(kind, key), user="U0CHAOS")
        world.threads[key] = thread
        context = SurfaceContext(surface="slack", channel=SLACK_CHANNEL, user="U0CHAOS", thread=thread)
    context = context or SurfaceContext(surface="cli", channel="graceful", user=APPROVER)
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
    cut = await processes_of(SLOW)
    await deploy(world, LOOPS)
    assert cut and not set(cut) & set(running_commands(SLOW)), "the cut command outlived its worker"
    result = await asyncio.wait_for(loop.result(), 240)
    assert result.status is LoopStatus.SUCCESS, result
    history = (await loop.fetch_history()).to_json()
    assert "WorkerShutdown" in history  # the command was cut, and run again on the new worker
    rounds = await loop_store.reports(await get_pool(world.settings.require_database_url()), loop.id)
    notes = [report.note for report in rounds if "interrupted" in report.note]
    assert len(notes) == 1 and "interrupted by a worker shutdown; run again on a new workspace" in notes[0]
    assert notes[0].startswith(("round 1 verify", "round 1 fix", "round 2 verify", "round 2 fix")), notes


async def test_mid_native_tool_whose_write_was_accepted(world: ChaosWorld) -> None:
    world.github.hang_after_accept("POST", f"/repos/{REPO}/issues", seconds=25)
    key, handle = await begin(world, "issue")
    await approve(handle)

    async def creating() -> bool:
        return "openloop.tool.run" in await pending_activities(handle)

    await until("the issue being created", creating)
    await deploy(world, AGENTS)
    await finished(handle)
    assert [issue["title"] for issue in world.github.issues(REPO)].count(f"chaos {key}") == 1


async def test_a_coding_command_longer_than_the_grace_period(world: ChaosWorld) -> None:
    key, handle = await begin(world, "slowcode")

    async def running() -> bool:  # asked after the edit: the answer is the slow command
        return asked(world, key) == 3 and CodeActivity.RUN_TOOL in await pending_activities(handle)

    await until("the coding command", running, within=90)
    cut = await processes_of(SLOW)
    await deploy(world, LOOPS)
    assert cut and not set(cut) & set(running_commands(SLOW)), "the cut command outlived its worker"
    await approve(handle)  # the pull request, with the edit made before the stop
    await finished(handle)
    assert len(pulls_of(world, handle.id)) == 1
    told = [
        str(r.body.get("messages")) for r in world.model.requests if f" {key}]" in str(r.body.get("messages"))
    ]
    assert "code.run was interrupted by a worker shutdown; it ran again on a new workspace" in told[-1]


async def test_the_pull_request_being_opened(world: ChaosWorld) -> None:
    world.github.hang_after_accept("POST", f"/repos/{REPO}/git/commits", seconds=25)
    key, handle = await begin(world, "code")
    await approve(handle)

    async def opening() -> bool:
        return CodeActivity.OPEN_PULL_REQUEST in await pending_activities(handle)

    await until("the pull request being opened", opening, within=90)
    await deploy(world, AGENTS)
    await finished(handle)
    assert len(pulls_of(world, handle.id)) == 1


def pulls_of(world: ChaosWorld, task_id: str) -> list[dict[str, Any]]:
    return [
        pull for pull in pull_requests(world.github, REPO) if pull["head"]["ref"] == f"openloop/{task_id}"
    ]


async def test_mid_streamed_answer(world: ChaosWorld) -> None:
    world.model.responder = respond(REPO, piece_delay=0.4)  # about 4 s of streaming
    try:
        key, handle = await begin(world, "slack")

        async def streaming() -> bool:  # part of the answer is in the thread, not all of it
            shown = [str(m.get("text")) for m in world.slack.thread(SLACK_CHANNEL, world.threads[key])]
            return any(text.startswith("The t") and not text.endswith("summarised.") for text in shown)

        await until("the answer streaming", streaming)
        await deploy(world, AGENTS)
        await finished(handle)
    finally:
        world.model.responder = respond(REPO)
    thread = world.slack.thread(SLACK_CHANNEL, world.threads[key])
    answers = [m for m in thread if f"The thread of {key} is summarised." in str(m.get("text"))]
    assert len(answers) == 1, thread  # one answer, whole, however the stream was cut


async def test_a_playbook_with_steps_in_parallel(world: ChaosWorld) -> None:
    world.model.responder = respond(REPO, delay=3.0)
    fan = next(playbook for playbook in chaos_playbooks() if playbook.name == FAN)
    key = f"g{uuid.uuid4().hex[:6]}"
    pool = await get_pool(world.settings.require_database_url())
    try:
        run_id, _ = await start_run(
            world.client, pool, world.settings.task_queue, fan, "chaos.go", {"key": key}, f"graceful-{key}"
        )
        run = world.client.get_workflow_handle(run_id, result_type=PlaybookRunResult)

        async def both_steps_asking() -> bool:
            steps = {w.id async for w in world.client.list_workflows(f"WorkflowId STARTS_WITH '{run_id}.'")}
            return {f"{run_id}.a", f"{run_id}.b"} <= steps

        await until("both parallel steps running", both_steps_asking)
        await deploy(world, AGENTS)
        result = await asyncio.wait_for(run.result(), 180)
    finally:
        world.model.responder = respond(REPO)
    assert result.status is PlaybookRunStatus.SUCCEEDED, result.reason
    assert [(step.name, step.output) for step in result.steps] == [
        (n, {"ok": True}) for n in ("a", "b", "join")
    ]
    steps = {w.id async for w in world.client.list_workflows(f"WorkflowId STARTS_WITH '{run_id}.'")}
    assert steps == {f"{run_id}.{name}" for name in ("a", "b", "join")}  # each step's task once
