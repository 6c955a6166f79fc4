"""Record the histories of representative tasks into tests/workflow/histories/ (the replay gate).

Run by hand after a deliberate, replay-safe change to the workflow, then commit the JSON:

    python -m tests.workflow.record_histories

Each scenario runs the real AgentTaskWorkflow with scripted stand-in activities on the
time-skipping test server (days of waiting take milliseconds) and keeps its history. The
histories are never re-recorded to make a failing replay test pass: a workflow change that
cannot replay them goes behind a patch in `workflows.patch_ledger` (see the README).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.mcp.gateway import spec_of
from activities.tools.catalog import specs_for
from config.loader import parse_agent
from tests.workflow.scripted import Script, say, use
from workers.embedded import find_binary
from workers.history import fetch_history, write_history
from workers.interceptors import TaskTelemetryInterceptor
from workers.sandbox import workflow_runner
from workers.setup import register_search_attributes
from workflows.agent_task import AgentTaskWorkflow
from workflows.payloads import data_converter
from workflows.types import (
    ApprovalDecision,
    Decision,
    ModelCallResult,
    ModelUsage,
    SurfaceContext,
    TaskInput,
    TaskResult,
    TaskStatus,
    ToolCall,
    UserMessage,
)

HISTORIES = Path(__file__).parent / "histories"

HELPER_YAML = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: helper}
spec:
  model_policy: {default: scripted/model}
  tools:
    - {name: memory.search, permissions: ["memory:read"]}
  approvals: {ttl: 1h}
  budget: {per_task_usd: 0.01}
"""

ISSUES_YAML = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: triage}
spec:
  model_policy: {default: scripted/model}
  tools:
    - {name: github.create_issue, permissions: ["issues:write"], limit_to: [acme/platform]}
  approvals:
    require_for: [github.create_issue]
    approvers: [U_ALICE]
    ttl: 72h
"""
ISSUE_ARGS = json.dumps({"repo": "acme/platform", "title": "Flaky deploy step"})
SEARCH_ARGS = json.dumps({"query": "deploy runbook"})
ROLLBACK_ARGS = json.dumps({"query": "rollback decision"})

Handle = WorkflowHandle[AgentTaskWorkflow, TaskResult]
Drive = Callable[[WorkflowEnvironment, Handle], Awaitable[None]]


async def _nothing(env: WorkflowEnvironment, handle: Handle) -> None:
    return None


async def wait_for_status(handle: Handle, status: TaskStatus) -> None:
    for _ in range(200):
        if (await handle.query(AgentTaskWorkflow.status)).status == status:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{handle.id} never reached {status}")


async def _approve(env: WorkflowEnvironment, handle: Handle) -> None:
    await wait_for_status(handle, TaskStatus.WAITING_APPROVAL)
    pending = (await handle.query(AgentTaskWorkflow.status)).pending_approval
    assert pending is not None
    await env.sleep(timedelta(hours=5))
    await handle.signal(
        AgentTaskWorkflow.approve, ApprovalDecision(pending.request_id, pending.action_id, "U_ALICE")
    )


async def _decide_by_update(env: WorkflowEnvironment, handle: Handle) -> None:
    """As every surface decides: an outsider, refused at the door (nothing in the history),
    then the approver, through the `openloop.task.decide` update."""
    await wait_for_status(handle, TaskStatus.WAITING_APPROVAL)
    pending = (await handle.query(AgentTaskWorkflow.status)).pending_approval
    assert pending is not None
    await env.sleep(timedelta(hours=5))
    outsider = ApprovalDecision(pending.request_id, pending.action_id, "U_MALLORY")
    try:
        await handle.execute_update(AgentTaskWorkflow.decide, Decision(approve=outsider))
        raise AssertionError("an outsider's decision counted")
    except WorkflowUpdateFailedError:
        pass
    approver = ApprovalDecision(pending.request_id, pending.action_id, "U_ALICE")
    assert (await handle.execute_update(AgentTaskWorkflow.decide, Decision(approve=approver))).counted


async def _let_expire(env: WorkflowEnvironment, handle: Handle) -> None:
    await wait_for_status(handle, TaskStatus.WAITING_APPROVAL)
    await env.sleep(timedelta(hours=72, minutes=1))


async def _budget_runs_out(env: WorkflowEnvironment, handle: Handle) -> None:
    await wait_for_status(handle, TaskStatus.WAITING_BUDGET)
    await env.sleep(timedelta(hours=1, minutes=1))


async def _answer_question(env: WorkflowEnvironment, handle: Handle) -> None:
    await wait_for_status(handle, TaskStatus.WAITING_USER)
    await env.sleep(timedelta(minutes=10))
    await handle.signal(AgentTaskWorkflow.user_message, UserMessage("U_BOB", "staging, please"))


@dataclass(frozen=True)
class Scenario:
    name: str
    agent_yaml: str
    request: str
    script: Callable[[], Script]
    drive: Drive
    expected: TaskStatus


MIXED_YAML = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: mixed}
spec:
  model_policy: {default: scripted/model}
  surfaces:
    github: {repos: [acme/platform]}
  tools:
    - {name: memory.search, permissions: ["memory:read"]}
    - {name: github.create_issue, permissions: ["issues:write"]}
    - {name: slack.post_message, permissions: ["chat:write"]}
  approvals:
    require_for: [github.create_issue]
    approvers: [U_ALICE]
    ttl: 72h
"""


MCP_YAML = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: notes-keeper}
spec:
  model_policy: {default: scripted/model}
  mcp_servers:
    - name: notes
      transport: stdio
      command: [python, -m, tests.fakes.mcp_servers, stdio, /tmp/never-started]
      allow: [read_note, create_note]
      writes: [create_note]
  approvals:
    require_for: ["notes.create_*"]
    approvers: [U_ALICE]
"""


def _mcp_tools() -> Script:
    """Listed at the start, a read, then a gated write: replays with no MCP server running."""
    server = parse_agent(MCP_YAML).spec.mcp_servers[0]
    string = {"type": "string"}
    specs = [
        spec_of(server, "read_note", "Read a note.", {"type": "object", "properties": {"name": string}}),
        spec_of(server, "create_note", "Create a note.", {"type": "object", "properties": {"title": string}}),
    ]
    answers = [
        use("notes.read_note", json.dumps({"name": "deploys"}), "c1", (180, 20), 0.0003),
        use("notes.create_note", json.dumps({"title": "Deploy on Tuesdays"}), "c2", (220, 20), 0.0004),
        say("Saved the note.", (240, 10), 0.0004),
    ]
    return Script(answers, mcp_specs=specs)


def _mixed_step() -> Script:
    """A local read, a gated write under a repeated provider call id and an invalid call in
    one step; then a write to a channel the agent is not bound to (refused)."""
    calls = [
        ToolCall("c1", "memory__search", SEARCH_ARGS),
        ToolCall("c1", "github__create_issue", ISSUE_ARGS),
        ToolCall("c1", "github__create_issue", "{not json"),
    ]
    first = ModelCallResult("", calls, "tool_calls", ModelUsage("scripted/model", 200, 30, 0.0005), 0, 0)
    post = json.dumps({"channel": "C_ELSEWHERE", "text": "Filed it."})
    return Script(
        [first, use("slack.post_message", post, "c9", (220, 20), 0.0004), say("Filed it.", (240, 10), 0.0004)]
    )


SCENARIOS = (
    Scenario("mcp_tools", MCP_YAML, "save the deploy note", _mcp_tools, _approve, TaskStatus.SUCCESS),
    # Bound writes, keys from the call's position, an invalid call audited, the status set
    # after the reply.
    Scenario(
        "catalog_mixed_step",
        MIXED_YAML,
        "file the flaky deploy and tell #elsewhere",
        _mixed_step,
        _approve,
        TaskStatus.SUCCESS,
    ),
    Scenario(
        "plain_answer",
        HELPER_YAML,
        "where is the deploy runbook?",
        lambda: Script([say("It is in docs/runbook.md.", (120, 12), 0.0002)]),
        _nothing,
        TaskStatus.SUCCESS,
    ),
    Scenario(
        "tool_call",
        HELPER_YAML,
        "what did we decide about deploys?",
        lambda: Script(
            [
                use("memory.search", SEARCH_ARGS, "c1", (150, 20), 0.0003),
                say("We deploy on Tuesdays.", (210, 15), 0.0004),
            ]
        ),
        _nothing,
        TaskStatus.SUCCESS,
    ),
    # Read-only local tools run inside the next model call.
    Scenario(
        "folded_tools",
        HELPER_YAML,
        "what did we decide about deploys and rollbacks?",
        lambda: Script(
            [
                use("memory.search", SEARCH_ARGS, "c1", (150, 20), 0.0003),
                use("memory.search", ROLLBACK_ARGS, "c2", (180, 20), 0.0003),
                say("Deploys on Tuesdays; roll back with the runbook.", (230, 15), 0.0004),
            ]
        ),
        _nothing,
        TaskStatus.SUCCESS,
    ),
    Scenario(
        "approval_approved",
        ISSUES_YAML,
        "open an issue for the flaky deploy step",
        lambda: Script(
            [
                use("github.create_issue", ISSUE_ARGS, "c1", (200, 30), 0.0005),
                say("Opened the issue.", (260, 10), 0.0004),
            ]
        ),
        _approve,
        TaskStatus.SUCCESS,
    ),
    Scenario(
        "approval_expired",
        ISSUES_YAML,
        "open an issue for the flaky deploy step",
        lambda: Script([use("github.create_issue", ISSUE_ARGS, "c1", (200, 30), 0.0005)]),
        _let_expire,
        TaskStatus.APPROVAL_EXPIRED,
    ),
    Scenario(
        "budget_exhausted",
        HELPER_YAML,
        "summarise every deploy decision",
        lambda: Script([use("memory.search", SEARCH_ARGS, "c1", (4000, 200), 0.02)]),
        _budget_runs_out,
        TaskStatus.BUDGET_EXHAUSTED,
    ),
    Scenario(
        "follow_up",
        HELPER_YAML,
        "deploy the release",
        lambda: Script(
            [
                say("Which environment, staging or production?", (90, 9), 0.0001),
                say("Deploying to staging.", (130, 6), 0.0002),
            ]
        ),
        _answer_question,
        TaskStatus.SUCCESS,
    ),
    # After 0.1.0: a decision through the `openloop.task.decide` update.
    Scenario(
        "approval_by_update",
        ISSUES_YAML,
        "open an issue for the flaky deploy step",
        lambda: Script(
            [
                use("github.create_issue", ISSUE_ARGS, "c1", (200, 30), 0.0005),
                say("Opened the issue.", (260, 10), 0.0004),
            ]
        ),
        _decide_by_update,
        TaskStatus.SUCCESS,
    ),
    # Patch `approvers-search-attribute`: the pending approval published for the inbox (its
    # search attribute and memo set, then removed once decided).
    Scenario(
        "approval_published",
        ISSUES_YAML,
        "open an issue for the flaky deploy step",
        lambda: Script(
            [
                use("github.create_issue", ISSUE_ARGS, "c1", (200, 30), 0.0005),
                say("Opened the issue.", (260, 10), 0.0004),
            ]
        ),
        _decide_by_update,
        TaskStatus.SUCCESS,
    ),
)


def scenario_input(scenario: Scenario) -> TaskInput:
    agent = parse_agent(scenario.agent_yaml)
    return TaskInput(
        task_id=f"task-cli-recorded-{scenario.name.replace('_', '-')}",
        agent=agent,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request=scenario.request,
        tools=specs_for(agent),
    )


async def run_scenario(env: WorkflowEnvironment, scenario: Scenario, task_queue: str) -> Handle:
    """Run one scenario to its end and return its handle (the history is on the server)."""
    inp = scenario_input(scenario)
    async with Worker(
        env.client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=scenario.script().activities(),
        workflow_runner=workflow_runner(),
        interceptors=[TaskTelemetryInterceptor()],
    ):
        handle = await env.client.start_workflow(
            AgentTaskWorkflow.run,
            inp,
            id=inp.task_id,
            task_queue=task_queue,
            static_summary=f"{inp.agent.name}: {inp.request}",
        )
        await scenario.drive(env, handle)
        result = await handle.result()
    if result.status != scenario.expected:
        raise AssertionError(f"{scenario.name}: ended {result.status}, expected {scenario.expected}")
    return handle


async def record(names: list[str]) -> list[Path]:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=data_converter,
        test_server_existing_path=find_binary("temporal-test-server"),
    )
    written: list[Path] = []
    try:
        await register_search_attributes(env.client, "default")
        for scenario in SCENARIOS:
            if names and scenario.name not in names:
                continue
            handle = await run_scenario(env, scenario, f"record-{scenario.name}")
            history = await fetch_history(env.client, handle.id)
            written.append(write_history(history, HISTORIES / f"{scenario.name}.json"))
            print(f"recorded {scenario.name}: {len(history.events)} events")
    finally:
        await env.shutdown()
    return written


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1:]))
