"""`openloop tasks show` and `explain` of a task with subagents and a teammate, on the real
dev server: the tree of tasks (agent, kind, status, steps, cost), the children's steps in
the parent's timeline and decisions, the tree's total cost, and a parent whose subagent
waits for an approval saying so while it runs."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from activities.tools.catalog import NATIVE_TOOLS
from config.loader import parse_agent
from tests.helpers import Handle, status_when
from tests.integration.observe_env import Cli
from tests.workflow.delegation_env import ISSUE
from tests.workflow.scripted import Script, say, use
from workers.embedded import TemporalDevServer
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.delegate_tool import TeammateLookup, TeammateStart
from workflows.tools.agents import ask_teammate, delegate
from workflows.types import (
    ActivityName,
    ModelCallInput,
    ModelCallResult,
    ModelUsage,
    SurfaceContext,
    TaskInput,
    TaskStatus,
    ToolCall,
)

LEAD = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: NAME}
spec:
  model_policy: {default: scripted/model}
  tools:
    - {name: agent.delegate, permissions: ["agents:delegate"]}
    - {name: agent.ask_teammate, permissions: ["agents:ask"]}
    - {name: github.create_issue, permissions: [issues:write], limit_to: [acme/platform]}
  approvals:
    require_for: [github.create_issue]
    approvers: [U_ALICE]
  budget: {per_task_usd: 1.0}
  team: [security-reviewer]
"""
REVIEWER = parse_agent(LEAD.replace("NAME", "security-reviewer").replace("  team: [security-reviewer]\n", ""))
USAGE = ModelUsage("scripted/model", 100, 20, 0.001)


def fan_out(request: str) -> ModelCallResult:
    if "waits" in request:  # one subagent that opens an issue (and so waits for U_ALICE)
        calls = [ToolCall("", "agent__delegate", json.dumps({"task": "open the issue"}))]
    else:
        calls = [
            ToolCall("", "agent__delegate", json.dumps({"task": "read the thread"})),
            ToolCall("", "agent__delegate", json.dumps({"task": "read the runbook"})),
            ToolCall(
                "",
                "agent__ask_teammate",
                json.dumps({"teammate": "security-reviewer", "question": "is it safe?"}),
            ),
        ]
    return ModelCallResult("", calls, "tool_calls", USAGE, 0, 0)


def answer(inp: ModelCallInput) -> ModelCallResult:
    """Children answer in one step (the issue opener after its tool); the lead fans out, then
    sums up."""
    told = any(m.role == "tool" for m in inp.cursor.new_messages)
    if re.search(r"-[dt]\d+-", inp.task_id):
        if "open the issue" in inp.cursor.new_messages[-1].content and not told:
            return use("github.create_issue", ISSUE, cost=0.002)
        return say(f"{inp.task.agent_name} found it.", cost=0.002)
    if inp.step == 1:
        return fan_out(inp.cursor.new_messages[-1].content)
    return say("Summed up.", cost=0.001)


@dataclass
class Tree:
    lead: str
    done: Handle
    waiting: Handle


@pytest.fixture
async def tree(client: Client, task_queue: str) -> AsyncIterator[Tree]:
    lead = f"lead-{uuid.uuid4().hex[:8]}"

    @activity.defn(name=ActivityName.TEAMMATE_START)
    async def teammate_input(inp: TeammateLookup) -> TeammateStart:
        return TeammateStart(REVIEWER, 2, [])

    script = Script([], default=answer)
    create_issue = NATIVE_TOOLS["github.create_issue"].spec

    async def start(request: str) -> Handle:
        inp = TaskInput(
            task_id=f"task-tree-{uuid.uuid4().hex[:10]}",
            agent=parse_agent(LEAD.replace("NAME", lead)),
            agent_version=1,
            context=SurfaceContext(surface="cli", channel="cli", user="U_BOB"),
            request=request,
            tools=[delegate.spec, ask_teammate.spec, create_issue],
        )
        return await client.start_workflow(AgentTaskWorkflow.run, inp, id=inp.task_id, task_queue=task_queue)

    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=[*script.activities(), teammate_input],
        workflow_runner=workflow_runner(),
    ):
        done = await start("check the decision")
        assert (await done.result()).status == TaskStatus.SUCCESS
        waiting = await start("open an issue; it waits for approval")
        await status_when(waiting, lambda s: s.last_action.startswith("waiting: "))
        yield Tree(lead, done, waiting)
        if (await waiting.describe()).status == WorkflowExecutionStatus.RUNNING:
            await waiting.terminate("test over")


@pytest.fixture
def cli(dev_server: TemporalDevServer) -> Cli:
    return Cli(dev_server.address)


async def test_tasks_show_draws_the_tree_and_rolls_up_the_childrens_steps_and_cost(
    cli: Cli, tree: Tree
) -> None:
    shown = await cli("tasks", "show", tree.done.id)
    assert shown.exit_code == 0, shown.output
    out = shown.output
    parent = tree.done.id
    assert f"{parent}  task · agent {tree.lead} · SUCCESS · 2 step(s) · $0.0020" in out
    subagents = re.findall(rf"{parent}-d1-[0-9a-f]{{8}}-00[01]  subagent · agent {tree.lead} · ", out)
    assert len(subagents) == 2, out
    assert out.count("· SUCCESS · 1 step(s) · $0.0020") == 3  # two subagents and the teammate
    assert re.search(rf"{parent}-t1-[0-9a-f]{{8}}-002  teammate · agent security-reviewer · SUCCESS", out)
    # The children's steps are in the parent's timeline, marked with the child they come from.
    assert re.search(r"\[subagent d1-[0-9a-f]{8}-000\] scripted/model: answered", out), out
    assert re.search(r"\[teammate security-reviewer t1-[0-9a-f]{8}-002\] scripted/model: answered", out)
    assert "started subagent" in out and "ended SUCCESS after 1 step(s)" in out
    assert "Total cost $0.0080 with its children" in out  # 2 x $0.001 + 3 x $0.002

    explained = await cli("explain", tree.done.id)
    assert explained.exit_code == 0, explained.output
    assert f"child: started teammate security-reviewer {parent}-t1-" in explained.output
    assert re.search(r"model: \[subagent d1-[0-9a-f]{8}-001\] scripted/model: answered", explained.output)


async def test_tasks_show_says_which_subagent_waits_for_whose_approval(cli: Cli, tree: Tree) -> None:
    shown = await cli("tasks", "show", tree.waiting.id)
    assert shown.exit_code == 0, shown.output
    child = re.search(rf"({tree.waiting.id}-d1-[0-9a-f]{{8}}-000)", shown.output)
    assert child is not None, shown.output
    assert (
        f"Status RUNNING (live): waiting: subagent {child.group(1)} waits for approval of "
        "github.create_issue by U_ALICE"
    ) in shown.output
    assert f"{child.group(1)}  subagent · agent {tree.lead} · WAITING_APPROVAL · 1 step(s)" in shown.output
    # The child's signal is in the parent's timeline; the child's request to U_ALICE, marked.
    assert f"│ child    │ subagent {child.group(1)} waits for approval of github.create_issue" in shown.output
    assert re.search(
        r"\[subagent d1-[0-9a-f]{8}-000\] asked U_ALICE to approve github.create_issue", shown.output
    )
