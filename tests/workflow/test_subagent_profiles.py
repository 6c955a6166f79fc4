"""Named subagent profiles and depth on the time-skipping server: a profile narrows the
parent's tools (never widens them) and prefaces the child's instructions; an unknown one is
refused with the known ones; a child at the depth limit is not offered `agent.delegate`, and
with `max_depth: 2` a grandchild runs and its cost rolls up to the root under its ceiling;
`max_parallel` caps the children running at once."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.tools.catalog import specs_for
from config.loader import parse_agent
from config.subagents import BUILT_IN_PROFILES
from tests.workflow.delegation_env import is_child
from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import start, worker
from workflows.types import (
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
metadata: {name: lead}
spec:
  instructions: Lead the work.
  model_policy: {default: scripted/model}
  tools:
    - {name: agent.delegate, permissions: ["agents:delegate"]}
    - {name: github.create_issue, permissions: [issues:write], limit_to: [acme/platform]}
    - {name: github.get_issue, permissions: [issues:read]}
    - {name: memory.search, permissions: [memory:read]}
  budget: {per_task_usd: 1.0}
"""


def lead_task(extra: str = "") -> TaskInput:
    agent = parse_agent(LEAD + extra)
    return TaskInput(
        task_id=f"task-lead-{uuid.uuid4().hex[:10]}",
        agent=agent,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="split this up",
        tools=specs_for(agent),
    )


def depth(task_id: str) -> int:
    """How many delegations below the root: each adds `-d<step>-<call key>` to the id."""
    return len(re.findall(r"-d\d+-[0-9a-f]{8}-\d{3}", task_id))


async def child_input(client: Client, task_id: str) -> TaskInput:
    history = await client.get_workflow_handle(task_id).fetch_history()
    attrs = history.events[0].workflow_execution_started_event_attributes
    [decoded] = await client.data_converter.decode(attrs.input.payloads, [TaskInput])
    assert isinstance(decoded, TaskInput)
    return decoded


def delegate_once(arguments: list[dict[str, object]]) -> Callable[[ModelCallInput], ModelCallResult]:
    """The root delegates with `arguments` (one call each), then sums up; children answer."""

    def answer(inp: ModelCallInput) -> ModelCallResult:
        if is_child(inp.task_id):
            return say(f"child saw {', '.join(inp.offered_tools)}")
        if any(m.role == "tool" for m in inp.cursor.new_messages):
            return say("Done.")
        calls = [ToolCall("", "agent__delegate", json.dumps(args)) for args in arguments]
        return ModelCallResult("", calls, "tool_calls", ModelUsage("scripted/model", 100, 20, 0.01), 0, 0)

    return answer


async def test_a_profile_narrows_the_parents_tools_and_prefaces_the_instructions(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    asked = [
        {"task": "find the issue", "profile": "explore"},
        {"task": "plan the fix", "profile": "plan", "tools": ["memory.search", "github.create_issue"]},
        {"task": "sort them", "profile": "triage"},
        {"task": "review it", "profile": "review"},
    ]
    extra = "  subagents:\n    profiles:\n      triage: {instructions: Sort the issues., tools: [github.*]}\n"
    script = Script([], default=delegate_once(asked))
    async with worker(ts_env, script, task_queue):
        parent = lead_task(extra)
        result = await (await start(ts_env, parent, task_queue)).result()
        children = sorted({inp.task_id for inp in script.model_inputs if is_child(inp.task_id)})
        inputs = {inp.request: inp for inp in [await child_input(ts_env.client, c) for c in children]}
    assert result.status == TaskStatus.SUCCESS
    offered = {inp.task_id: inp.offered_tools for inp in script.model_inputs if is_child(inp.task_id)}
    by_request = {request: offered[inp.task_id] for request, inp in inputs.items()}
    # Read-only for explore; a named tool outside the profile is not added back; never delegation.
    assert by_request == {
        "find the issue": ["github.get_issue", "memory.search"],
        "plan the fix": ["memory.search"],
        "sort them": ["github.create_issue", "github.get_issue"],  # the agent's own profile
    }
    explore = inputs["find the issue"].agent.spec.instructions
    assert explore == f"{BUILT_IN_PROFILES['explore'].instructions}\n\nLead the work."
    assert inputs["sort them"].agent.spec.instructions.startswith("Sort the issues.\n\n")
    told = [m.content for m in script.model_inputs[-1].new_messages if m.role == "tool"]
    refused = [text for text in told if "review" in text]
    assert refused == [
        "Error (invalid): there is no subagent profile 'review'; profiles: code, explore, plan, triage"
    ], told


def nested(grandchild_cost: float, child_delegates: bool) -> Callable[[ModelCallInput], ModelCallResult]:
    """The root delegates one piece; its child delegates again (when offered or told to try)."""

    def answer(inp: ModelCallInput) -> ModelCallResult:
        done = any(m.role == "tool" for m in inp.cursor.new_messages)
        level = depth(inp.task_id)
        if level == 2:
            return say("grandchild found it", cost=min(grandchild_cost, inp.usd_headroom))
        if done:
            told = next(m.content for m in inp.cursor.new_messages if m.role == "tool")
            return say(f"level {level} heard: {told}", cost=0.01)
        if level == 0 or child_delegates:
            return use("agent.delegate", json.dumps({"task": f"go deeper from {level}"}), cost=0.01)
        return say("child answered itself", cost=0.01)

    return answer


async def test_with_max_depth_two_a_grandchild_runs_and_its_cost_rolls_up_under_the_roots_ceiling(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=nested(0.3, child_delegates=True))
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, lead_task("  subagents: {max_depth: 2}\n"), task_queue)).result()
    levels = {depth(inp.task_id): inp for inp in script.model_inputs}
    assert sorted(levels) == [0, 1, 2]
    assert "agent.delegate" in levels[1].offered_tools  # a child may delegate once more
    assert "agent.delegate" not in levels[2].offered_tools  # the grandchild is at the limit
    assert result.status == TaskStatus.SUCCESS and "grandchild found it" in result.reply
    # The grandchild's slice came out of what the root and the child had left...
    assert levels[2].usd_headroom <= 1.0 - 0.02 + 1e-9
    # ...and its spend rolls up: root 2 calls, child 2 calls at $0.01, the grandchild's $0.30.
    assert result.usage.cost_usd == pytest.approx(0.04 + 0.3)


async def test_a_grandchild_spending_all_it_may_never_takes_the_root_past_its_ceiling(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=nested(50.0, child_delegates=True))  # far more than the tree has
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, lead_task("  subagents: {max_depth: 2}\n"), task_queue)).result()
    assert any(depth(inp.task_id) == 2 for inp in script.model_inputs)
    assert result.usage.cost_usd <= 1.0 + 1e-9, result.usage
    assert result.usage.cost_usd == pytest.approx(1.0, abs=0.02)  # the grandchild's spend counted


async def test_by_default_a_child_is_not_offered_delegation_and_its_attempt_is_refused(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=nested(0.0, child_delegates=True))
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, lead_task(), task_queue)).result()
    child = [inp for inp in script.model_inputs if depth(inp.task_id) == 1]
    assert child and all("agent.delegate" not in inp.offered_tools for inp in child)
    assert not any(depth(inp.task_id) == 2 for inp in script.model_inputs)  # no grandchild started
    refusal = next(m.content for m in child[-1].cursor.new_messages if m.role == "tool")
    assert refusal.startswith("Error: agent.delegate is refused: this task is 1 level(s) below"), refusal
    assert "depth limit (spec.subagents.max_depth" in refusal and "unknown tool" not in refusal
    assert result.status == TaskStatus.SUCCESS


async def test_max_parallel_caps_the_children_running_at_once(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=delegate_once([{"task": f"part {n}"} for n in range(5)]))
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, lead_task("  subagents: {max_parallel: 2}\n"), task_queue)
        assert (await handle.result()).status == TaskStatus.SUCCESS
        running, most, started = 0, 0, 0
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
                running, started = running + 1, started + 1
                most = max(most, running)
            elif event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
                running -= 1
    assert (started, most) == (5, 2)
