"""A tree of teammates and subagents on the time-skipping server is bounded whatever the path:
an agent never asks itself or an agent above it (A asks B asks A ends at B, with the cycle
named), depth counts subagents and teammates together, a teammate's budget is carved out of
what its asker has left and its spend charged back, and a call past the depth limit hears
about the limit (not "unknown tool"). Config validation refuses an agent in its own team."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable

import pytest
import yaml
from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.tools.catalog import specs_for
from config.agent import AgentConfig
from config.loader import AgentConfigError, parse_agent
from config.subagents import TREE_DEPTH
from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import start
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.delegate_tool import TeammateLookup, TeammateStart
from workflows.types import (
    ActivityName,
    ModelCallInput,
    ModelCallResult,
    SurfaceContext,
    TaskInput,
    TaskResult,
    TaskStatus,
)

RUNAWAY = 6  # the stand-in model stops asking here, so a tree without bounds still ends


def agent_yaml(name: str, team: list[str], usd: float = 1.0, max_depth: int = 1) -> str:
    return f"""
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {{name: {name}}}
spec:
  model_policy: {{default: scripted/model}}
  tools:
    - {{name: agent.delegate, permissions: ["agents:delegate"]}}
    - {{name: agent.ask_teammate, permissions: ["agents:ask"]}}
  team: [{", ".join(team)}]
  subagents: {{max_depth: {max_depth}}}
  budget: {{per_task_usd: {usd}}}
"""


def agent(name: str, team: list[str], usd: float = 1.0, max_depth: int = 1) -> AgentConfig:
    """As stored: the model's own rules, without the loader's (an agent applied earlier)."""
    return AgentConfig.model_validate(yaml.safe_load(agent_yaml(name, team, usd, max_depth)))


def depth(task_id: str) -> int:
    """Levels below the root: each subagent adds `-d<step>-<key>`, each teammate `-t<step>-<key>`."""
    return len(re.findall(r"-[dt]\d+-[0-9a-f]{8}-\d{3}", task_id))


def told(inp: ModelCallInput) -> str | None:
    return next((m.content for m in inp.cursor.new_messages if m.role == "tool"), None)


def asks_once(
    first: Callable[[ModelCallInput], ModelCallResult | None], cost: float = 0.0
) -> Callable[[ModelCallInput], ModelCallResult]:
    """Every task does `first` (None: answers at once), then answers with what it heard."""

    def answer(inp: ModelCallInput) -> ModelCallResult:
        heard = told(inp)
        if heard is not None:
            return say(f"{inp.task.agent_name} heard: {heard}")
        action = first(inp) if depth(inp.task_id) < RUNAWAY else None
        return action or say(f"{inp.task.agent_name} answered itself", cost=min(cost, inp.usd_headroom))

    return answer


def ask(teammate: str, cost: float = 0.0) -> ModelCallResult:
    return use("agent.ask_teammate", json.dumps({"teammate": teammate, "question": "what now?"}), cost=cost)


def delegate() -> ModelCallResult:
    return use("agent.delegate", json.dumps({"task": "go deeper"}))


def tree_worker(env: WorkflowEnvironment, script: Script, queue: str, team: dict[str, AgentConfig]) -> Worker:
    @activity.defn(name=ActivityName.TEAMMATE_START)
    async def teammate_input(inp: TeammateLookup) -> TeammateStart:
        found = team[inp.teammate]
        return TeammateStart(found, 1, specs_for(found))

    return Worker(
        env.client,
        task_queue=queue,
        workflows=[AgentTaskWorkflow],
        activities=[*script.activities(), teammate_input],
        workflow_runner=workflow_runner(),
    )


async def run_tree(
    env: WorkflowEnvironment, queue: str, script: Script, team: dict[str, AgentConfig], root: str
) -> TaskResult:
    first = team[root]
    inp = TaskInput(
        task_id=f"task-{root}-{uuid.uuid4().hex[:10]}",
        agent=first,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="look into it",
        tools=specs_for(first),
    )
    async with tree_worker(env, script, queue, team):
        result: TaskResult = await (await start(env, inp, queue)).result()
    return result


def refusals(script: Script) -> dict[str, str]:
    """What each task heard back, by its agent and depth (`b@1`)."""
    return {
        f"{inp.task.agent_name}@{depth(inp.task_id)}": heard
        for inp in script.model_inputs
        if (heard := told(inp))
    }


def test_validation_refuses_an_agent_in_its_own_team() -> None:
    with pytest.raises(AgentConfigError) as raised:
        parse_agent(agent_yaml("lead", ["reviewer", "lead"]), "agents/lead.yaml")
    [problem] = raised.value.problems
    assert (problem.file, problem.line, problem.field) == ("agents/lead.yaml", 10, "spec.team[1]")
    assert "'lead' is this agent itself" in problem.message and "remove it from spec.team" in problem.message


async def test_two_agents_asking_each_other_end_at_the_second_with_the_cycle_named(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    team = {"a": agent("a", ["b"]), "b": agent("b", ["a"])}
    script = Script([], default=asks_once(lambda inp: ask("b" if inp.task.agent_name == "a" else "a")))
    result = await run_tree(ts_env, task_queue, script, team, "a")
    levels = sorted({depth(inp.task_id) for inp in script.model_inputs})
    assert levels == [0, 1], levels  # a, and the b it asked: b's question back to a never started
    heard = refusals(script)
    assert heard["b@1"] == (
        "Error (permission): asking 'a' would close a cycle (a -> b -> a): no agent asks "
        "itself or an agent that asked it; answer with what you have"
    )
    assert result.status == TaskStatus.SUCCESS and heard["a@0"].startswith("b (SUCCESS")


async def test_an_agent_stored_in_its_own_team_is_refused_at_run_time(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    team = {"a": agent("a", ["a"])}
    script = Script([], default=asks_once(lambda inp: ask("a")))
    await run_tree(ts_env, task_queue, script, team, "a")
    assert {depth(inp.task_id) for inp in script.model_inputs} == {0}
    assert "would close a cycle (a -> a)" in refusals(script)["a@0"]


async def test_depth_counts_teammates_and_subagents_together(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    # a delegates; its subagent asks b; b delegates; b's subagent tries to ask c: that is one
    # level past the tree's limit, though b's own max_depth (2) would allow another subagent.
    team = {"a": agent("a", ["b"], max_depth=2), "b": agent("b", ["c"], max_depth=2), "c": agent("c", [])}

    def first(inp: ModelCallInput) -> ModelCallResult:
        level = depth(inp.task_id)
        if level in (0, 2):
            return delegate()
        return ask("b" if inp.task.agent_name == "a" else "c")

    script = Script([], default=asks_once(first))
    await run_tree(ts_env, task_queue, script, team, "a")
    by_level = {depth(inp.task_id): inp for inp in script.model_inputs}
    assert sorted(by_level) == list(range(TREE_DEPTH + 1)) == [0, 1, 2, 3]
    deepest = by_level[TREE_DEPTH]
    assert deepest.task.agent_name == "b"
    offered = deepest.offered_tools
    assert "agent.ask_teammate" not in offered and "agent.delegate" not in offered
    refusal = refusals(script)["b@3"]
    assert "unknown tool" not in refusal
    assert "agent.ask_teammate is refused: this task is 3 level(s) below" in refusal
    assert "depth limit (spec.subagents.max_depth" in refusal


async def test_a_teammates_budget_is_carved_from_what_its_asker_has_left(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    # a may spend $1 a task and has spent $0.30 when it asks; b's own ceiling is $5, and b
    # spends all it is given (then a is out of budget and stops).
    team = {"a": agent("a", ["b"], usd=1.0), "b": agent("b", [], usd=5.0)}
    script = Script(
        [], default=asks_once(lambda inp: ask("b", cost=0.3) if inp.task.agent_name == "a" else None, 50.0)
    )
    result = await run_tree(ts_env, task_queue, script, team, "a")
    [asked] = [inp for inp in script.model_inputs if inp.task.agent_name == "b"]
    assert asked.usd_headroom == pytest.approx(0.7)  # what a had left, not b's $5
    assert result.usage.cost_usd <= 1.0 + 1e-9, result.usage  # the tree, under the root's ceiling
    assert result.usage.cost_usd == pytest.approx(1.0)  # b's spend is charged to a


async def test_a_teammate_at_the_depth_limit_asking_to_delegate_hears_the_limit(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    # a's subagent asks b; b's subagent is at the limit (b's max_depth 1) and tries to delegate.
    team = {"a": agent("a", ["b"], max_depth=2), "b": agent("b", [])}

    def first(inp: ModelCallInput) -> ModelCallResult:
        return ask("b") if (inp.task.agent_name, depth(inp.task_id)) == ("a", 1) else delegate()

    script = Script([], default=asks_once(first))
    await run_tree(ts_env, task_queue, script, team, "a")
    refusal = refusals(script)["b@3"]
    assert refusal == (
        "Error: agent.delegate is refused: this task is 3 level(s) below the task that started its "
        "tree, at the depth limit (spec.subagents.max_depth; subagents and teammates together go at "
        f"most {TREE_DEPTH} levels deep): do this work yourself"
    )
    assert max(depth(inp.task_id) for inp in script.model_inputs) == TREE_DEPTH
