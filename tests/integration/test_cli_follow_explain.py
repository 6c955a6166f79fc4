"""`openloop ask`'s live view and `openloop explain`, against the real dev server.

The task runs the real workflow with scripted stand-in activities; `follow_task` is what
`ask` runs after it starts the task, printing into a console a test can read.
"""

from __future__ import annotations

import asyncio
import io
import os
import uuid
from collections.abc import AsyncIterator

import pytest
from rich.console import Console
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Worker
from typer.testing import CliRunner

from activities.tools.catalog import specs_for
from config.loader import parse_agent
from surfaces.cli.follow import follow_task
from surfaces.cli.main import app
from surfaces.decisions import decide
from tests.helpers import pending_approval
from tests.workflow.record_histories import ISSUE_ARGS, ISSUES_YAML
from tests.workflow.scripted import Script, say, use
from workers.embedded import TemporalDevServer
from workers.sandbox import workflow_runner
from workers.telemetry import worker_interceptors
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, Decision, SurfaceContext, TaskInput, TaskResult, TaskStatus

Handle = WorkflowHandle[AgentTaskWorkflow, TaskResult]


@pytest.fixture
async def worker(client: Client, task_queue: str) -> AsyncIterator[Worker]:
    script = Script(
        [],
        default=lambda inp: (
            say("Filed it.", (210, 15), 0.0004)
            if inp.step > 1
            else use("github.create_issue", ISSUE_ARGS, "c1", (150, 20), 0.0003)
        ),
    )
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=script.activities(),
        workflow_runner=workflow_runner(),
        interceptors=worker_interceptors(),
    ) as running:
        yield running


async def _start(client: Client, task_queue: str) -> Handle:
    agent = f"triage-{uuid.uuid4().hex[:8]}"
    config = parse_agent(ISSUES_YAML.replace("{name: triage}", f"{{name: {agent}}}"))
    inp = TaskInput(
        task_id=f"task-cli-follow-{uuid.uuid4().hex[:10]}",
        agent=config,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="ops", user="U_BOB"),
        request="open an issue for the flaky deploy step",
        tools=specs_for(config),
    )
    attributes = TypedSearchAttributes(
        [
            SearchAttributePair(search.AGENT, agent),
            SearchAttributePair(search.SURFACE, "cli"),
            SearchAttributePair(search.STATUS, TaskStatus.RUNNING.value),
        ]
    )
    return await client.start_workflow(
        AgentTaskWorkflow.run, inp, id=inp.task_id, task_queue=task_queue, search_attributes=attributes
    )


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=300, highlight=False, color_system=None), buffer


async def test_without_a_terminal_ask_prints_the_approve_command_and_returns(
    client: Client, task_queue: str, worker: Worker
) -> None:
    handle = await _start(client, task_queue)
    out, buffer = _console()
    followed = await asyncio.wait_for(
        follow_task(handle, out, interactive=False, user="U_BOB", leave_when_waiting=True), 60
    )
    assert followed.left == "waiting" and followed.result is None
    text = buffer.getvalue()
    assert f"openloop approve {handle.id} --as APPROVER" in text
    # The step that asked for the approval is printed before the approval prompt.
    assert "step 1 model    scripted/model: 1 tool call(s)" in text.split("Approval needed")[0]

    # --timeout: follows through the approval wait, then gives up and says so.
    out, buffer = _console()
    followed = await follow_task(handle, out, interactive=False, user="U_BOB", follow_seconds=1.5)
    assert followed.left == "timeout" and "Still WAITING_APPROVAL" in buffer.getvalue()
    await handle.terminate("test over")


async def test_the_live_view_prints_every_step_in_order_before_the_answer(
    client: Client, task_queue: str, worker: Worker
) -> None:
    handle = await _start(client, task_queue)
    out, buffer = _console()
    following = asyncio.create_task(follow_task(handle, out, interactive=False, user="U_BOB"))
    pending = await pending_approval(handle)
    for _ in range(100):  # approve once the live view has shown the request
        if "Approval needed" in buffer.getvalue():
            break
        await asyncio.sleep(0.1)
    await handle.signal(
        AgentTaskWorkflow.approve, ApprovalDecision(pending.request_id, pending.action_id, "U_ALICE")
    )
    followed = await asyncio.wait_for(following, 60)
    assert followed.result is not None and followed.result.status == TaskStatus.SUCCESS
    text = buffer.getvalue()
    order = [
        "recalled 0 memories",
        "scripted/model: 1 tool call(s)",
        "Approval needed",
        "github.create_issue approved by U_ALICE",
        "github.create_issue: ok",
        "scripted/model: 0 tool call(s)",  # the last step, recorded just before the end
        "Filed it.",
        "SUCCESS",
    ]
    positions = [text.find(part) for part in order]
    assert -1 not in positions and positions == sorted(positions), text


async def _prompted(buffer: io.StringIO) -> None:
    for _ in range(600):  # the live view has asked [y/N]
        if "[y/N]" in buffer.getvalue():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(buffer.getvalue())


async def test_the_prompt_ends_when_the_approval_is_decided_elsewhere(
    client: Client, task_queue: str, worker: Worker
) -> None:
    handle = await _start(client, task_queue)
    out, buffer = _console()
    typed, keyboard = os.pipe()  # a terminal nobody answers
    try:
        following = asyncio.create_task(
            follow_task(handle, out, interactive=True, user="U_ALICE", answers=typed)
        )
        await _prompted(buffer)
        pending = await pending_approval(handle)
        said = ApprovalDecision(pending.request_id, pending.action_id, "U_ALICE")
        verdict = await decide(handle, None, Decision(approve=said))  # the dashboard, Slack, …
        assert verdict.counted, verdict.reason
        followed = await asyncio.wait_for(following, 60)
        os.write(keyboard, b"y\n")  # answering now is too late: nobody reads it
    finally:
        os.close(typed)
        os.close(keyboard)
    assert followed.result is not None and followed.result.status == TaskStatus.SUCCESS
    text = buffer.getvalue()
    order = [
        "[y/N]",
        "No longer asked here",
        "github.create_issue approved by U_ALICE",
        "Filed it.",
        "SUCCESS",
    ]
    positions = [text.find(part) for part in order]
    assert -1 not in positions and positions == sorted(positions), text
    assert "Not counted" not in text and text.count("[y/N]") == 1, text


async def test_an_answer_at_the_prompt_decides(client: Client, task_queue: str, worker: Worker) -> None:
    handle = await _start(client, task_queue)
    out, buffer = _console()
    typed, keyboard = os.pipe()
    try:
        following = asyncio.create_task(
            follow_task(handle, out, interactive=True, user="U_ALICE", answers=typed)
        )
        await _prompted(buffer)
        os.write(keyboard, b"maybe\ny\n")  # asked again until it is a yes or a no
        followed = await asyncio.wait_for(following, 60)
    finally:
        os.close(typed)
        os.close(keyboard)
    assert followed.result is not None and followed.result.status == TaskStatus.SUCCESS
    text = buffer.getvalue()
    assert "Please answer y or n." in text and "github.create_issue approved by U_ALICE" in text, text
    assert "No longer asked here" not in text


async def test_explain_lists_every_decision_and_a_denied_action_is_not_a_plain_success(
    client: Client, task_queue: str, worker: Worker, dev_server: TemporalDevServer
) -> None:
    handle = await _start(client, task_queue)
    pending = await pending_approval(handle)
    await handle.signal(  # not an approver: refused, and said why
        AgentTaskWorkflow.approve, ApprovalDecision(pending.request_id, pending.action_id, "U_BOB")
    )
    await handle.signal(
        AgentTaskWorkflow.deny, ApprovalDecision(pending.request_id, pending.action_id, "U_ALICE")
    )
    assert (await handle.result()).status == TaskStatus.SUCCESS
    env = {"OPENLOOP_TEMPORAL_ADDRESS": dev_server.address, "COLUMNS": "250"}
    explained = await asyncio.to_thread(lambda: CliRunner().invoke(app, ["explain", handle.id], env=env))
    out = explained.output
    assert explained.exit_code == 0, out
    assert "Reason: answered, but github.create_issue was denied by U_ALICE" in out
    assert "Next: Nothing to do; for a follow-up, ask again" in out  # a CLI task has no thread
    for decision in (
        "start: open an issue for the flaky deploy step",
        "model: scripted/model: 1 tool call(s): github.create_issue; 150+20 tokens (step 1)",
        "approval: asked U_ALICE to approve github.create_issue",
        "refused: approve from U_BOB ignored: U_BOB is not an approver of this agent",
        "approval: github.create_issue denied by U_ALICE",
        "model: scripted/model: answered (stop)",
        "stop: SUCCESS: answered",
    ):
        assert decision in out, out
    assert out.index("refused: approve from U_BOB") < out.index("approval: github.create_issue denied")

    await worker.shutdown()  # from the history alone: the same decisions
    again = await asyncio.to_thread(lambda: CliRunner().invoke(app, ["explain", handle.id], env=env))
    assert "refused: approve from U_BOB ignored" in again.output, again.output
    assert "answered, but github.create_issue was denied by U_ALICE" in again.output
