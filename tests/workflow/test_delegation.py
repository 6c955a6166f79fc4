"""Subagents on the time-skipping server: delegations from one answer run as child
workflows in parallel, each with a slice of what the parent has left, and the tree's
spend never passes the parent's ceiling."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from config.loader import parse_agent
from tests.workflow.delegation_env import delegations, is_child
from tests.workflow.scripted import Script, say
from tests.workflow.task_env import start, worker
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.delegate_tool import TeammateLookup, TeammateStart
from workflows.tool_catalog import ToolSpec
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

AGENT = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: lead}
spec:
  model_policy: {default: scripted/model}
  tools:
    - {name: agent.delegate, permissions: ["agents:delegate"]}
  budget: {per_task_usd: 1.0}
"""


def tree_model(children: int, child_cost: float) -> Callable[[ModelCallInput], ModelCallResult]:
    """The parent delegates `children` pieces, then sums up; each child answers at once."""
    parent_calls = []

    def answer(inp: ModelCallInput) -> ModelCallResult:
        if is_child(inp.task_id):  # a subagent
            spend = min(child_cost, inp.usd_headroom)  # a model call never passes its grant
            return say(f"found {inp.cursor.new_messages[-1].content}", cost=spend)
        parent_calls.append(inp)
        return delegations(children) if len(parent_calls) == 1 else say("Put together.", cost=0.01)

    return answer


def task(specs: list[ToolSpec] | None = None) -> TaskInput:
    return TaskInput(
        task_id=f"task-lead-{uuid.uuid4().hex[:10]}",
        agent=parse_agent(AGENT),
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="split this up",
        tools=specs if specs is not None else [delegate.spec],
    )


async def test_delegations_run_as_children_with_fresh_context_and_report_back(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=tree_model(3, 0.05))
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task(), task_queue)
        result = await handle.result()
    assert result.status == TaskStatus.SUCCESS and result.reply == "Put together."
    children = [inp for inp in script.model_inputs if is_child(inp.task_id)]
    assert len({inp.task_id for inp in children}) == 3  # one child per delegation, ids from the step
    for child in children:
        assert child.offered_tools == []  # a subagent never delegates again
        assert child.cursor.new_messages[-1].content.startswith("look into part")  # fresh context
    told = [m.content for m in script.model_inputs[-1].new_messages if m.role == "tool"]
    assert len(told) == 3 and all(text.startswith("Subagent SUCCESS") for text in told)
    assert result.usage.cost_usd == pytest.approx(0.01 + 3 * 0.05 + 0.01)  # the children's spend counts
    assert script.replies and not any(is_child(reply.task_id) for reply in script.replies)  # quiet children


async def test_eight_children_racing_never_spend_past_the_parents_ceiling(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=tree_model(8, 5.0))  # each child would spend far more than its slice
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, task(), task_queue)).result()
    children = [inp for inp in script.model_inputs if is_child(inp.task_id)]
    assert len({inp.task_id for inp in children}) == 8
    assert result.usage.cost_usd <= 1.0 + 1e-9, result.usage
    assert sum(min(5.0, inp.usd_headroom) for inp in children) <= 1.0 - 0.01 + 1e-9


REVIEWER = parse_agent(
    AGENT.replace("name: lead", "name: security-reviewer").replace("per_task_usd: 1.0", "per_task_usd: 0.2")
)


async def test_a_teammate_answers_with_its_own_agent_and_only_its_answer_comes_back(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    lookups: list[TeammateLookup] = []

    @activity.defn(name=ActivityName.TEAMMATE_START)
    async def teammate_input(inp: TeammateLookup) -> TeammateStart:
        lookups.append(inp)
        return TeammateStart(REVIEWER, 4, [])

    asks = [
        ToolCall(
            "",
            "agent__ask_teammate",
            json.dumps({"teammate": "security-reviewer", "question": "is it safe?"}),
        ),
        ToolCall("", "agent__ask_teammate", json.dumps({"teammate": "intruder", "question": "x"})),
    ]
    usage = ModelUsage("scripted/model", 100, 20, 0.01)

    def answer(inp: ModelCallInput) -> ModelCallResult:
        if "-t" in inp.task_id:
            return say("Safe, if the token is rotated.")
        first = not any("-t" not in seen.task_id for seen in script.model_inputs[:-1])
        return (
            ModelCallResult("", asks, "tool_calls", usage, 0, 0) if first else say("Checked with security.")
        )

    script = Script([], default=answer)
    lead = task([ask_teammate.spec])
    grant = 'agent.ask_teammate, permissions: ["agents:ask"]'
    lead.agent = parse_agent(
        AGENT.replace('agent.delegate, permissions: ["agents:delegate"]', grant)
        + "  team: [security-reviewer]\n"
    )
    async with Worker(
        ts_env.client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=[*script.activities(), teammate_input],
        workflow_runner=workflow_runner(),
    ):
        result = await (await start(ts_env, lead, task_queue)).result()
    assert result.status == TaskStatus.SUCCESS and result.reply == "Checked with security."
    assert [(lookup.teammate, lookup.workspace) for lookup in lookups] == [("security-reviewer", "default")]
    asked = next(inp for inp in script.model_inputs if "-t" in inp.task_id)
    assert asked.task.agent_name == "security-reviewer" and asked.budget.usd_headroom <= 0.2  # its own budget
    told = [m.content for m in script.model_inputs[-1].new_messages if m.role == "tool"]
    assert told[0].startswith("security-reviewer (SUCCESS") and "token is rotated" in told[0]
    assert "'intruder' is not on your team (security-reviewer)" in told[1]
