"""An agent as a repair loop's fixer (`fix: {agent: NAME}`), end to end on the real dev server,
Postgres, a loop worker with bubblewrap and git's smart HTTP, with a scripted model priced
like `openai/gpt-4o-mini`: round 2's fix is a child agent task lent the loop's workspace,
told the failing test and the last error, that repairs the project through `code.edit_file`;
and a loop whose `limits.budget` one child's calls overspend ends BUDGET_EXHAUSTED instead
of starting another round.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import Client

from activities.store.agents import StoredAgent, apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from surfaces.task_lookup import decision_chain
from surfaces.timeline import story_from_history
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.integration.coding_env import CODE_TOOLS, MODEL
from tests.integration.loop_env import PYTEST, LoopWorld, loop_world, project_with
from workflows import search
from workflows.loop_types import Limits, LoopStatus, Outcome, RoundVerdict, Step

FIX = {"path": "calc.py", "old": "/ (len(values) + 1)", "new": "/ len(values)"}
FAILING = "tests/test_calc.py::test_mean"


async def fixer_agent(world: LoopWorld) -> StoredAgent:
    """An applied agent with the coding tools, on the priced model."""
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": f"fixer-{uuid.uuid4().hex[:8]}"},
            "spec": {
                "model_policy": {"default": MODEL, "max_output_tokens": 256},
                "surfaces": {"github": {"repos": [world.repo]}},
                "tools": CODE_TOOLS,
            },
        }
    )
    stored, _ = await apply_agent(await get_pool(world.settings.require_database_url()), config)
    return stored


def user_text(api: FakeModelAPI, index: int) -> str:
    """Every user message of the model request at `index`, as one text."""
    messages = api.requests[index].body["messages"]
    return "\n".join(str(m.get("content") or "") for m in messages if m["role"] == "user")


async def test_an_agent_fixer_repairs_the_project_in_round_two(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    api.answer_tool_calls([tool_call("f1", "code__edit_file", FIX)])
    api.answer_tool_calls([tool_call("f2", "code__run_tests", {})])
    api.answer("Divided by len(values) instead of len(values) + 1 in calc.mean.")
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        agent = await fixer_agent(world)
        spec = world.spec({Step.FIX: f"agent {agent.name}", Step.VERIFY: PYTEST}, fixer_agent=agent.name)
        loop_id, result = await world.run(spec)
        reports = await world.reports(loop_id)
        patch = await world.diff(result)

    assert result.status is LoopStatus.SUCCESS, result.reason
    assert result.rounds == 2 and "round 2" in result.reason
    first, second = reports
    assert [c.step for c in first.commands] == [Step.VERIFY]
    assert first.failing_tests == [FAILING] and first.verdict is RoundVerdict.FAILED
    fix, verify = second.commands
    child = f"{loop_id}-fix2-1"
    assert fix.step is Step.FIX and fix.outcome is Outcome.PASSED
    assert fix.command == f"agent {agent.name} (task {child})"
    assert "Divided by len(values)" in fix.tail and "SUCCESS" in fix.tail
    assert verify.outcome is Outcome.PASSED
    assert second.fixed_tests == [FAILING] and second.verdict is RoundVerdict.PASSED

    # The child's first request named the failing test and round 1's last error.
    assert len(api.requests) == 3
    asked = user_text(api, 0)
    round_one_error = first.commands[-1].error_summary or first.commands[-1].tail
    assert f"Failing tests: {FAILING}" in asked
    assert round_one_error.strip() and round_one_error.strip()[-500:] in asked
    # Its edit went through the workspace the loop lent it: the loop's stored diff has it.
    assert "-    return sum(values) / (len(values) + 1)" in patch
    assert "+    return sum(values) / len(values)" in patch

    # The child is found by the filters a task is found by, and its story shows its tools.
    attributes = (await client.get_workflow_handle(child).describe()).typed_search_attributes
    assert attributes.get(search.AGENT) == agent.name
    assert (attributes.get(search.SURFACE), attributes.get(search.CHANNEL)) == ("cli", "loops")
    assert attributes.get(search.STATUS) == "SUCCESS"
    told = story_from_history((await client.get_workflow_handle(child).fetch_history()).events)
    chain = "\n".join(decision_chain(told))
    assert "tool: code.edit_file: ok: Edited calc.py" in chain, chain
    assert "tool: code.run_tests: tests after the change: passed" in chain, chain


async def test_a_budget_one_child_overspends_ends_the_loop_budget_exhausted(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    # One call of 100,000 prompt tokens on gpt-4o-mini costs $0.015, past the loop's $0.01.
    api.answer_tool_calls([tool_call("r1", "code__read_file", {"path": "calc.py"})], prompt_tokens=100_000)
    api.answer_tool_calls([tool_call("f1", "code__edit_file", FIX)])  # never asked for
    async with loop_world(client, pg_url, tmp_path, project_with(tmp_path)) as world:
        agent = await fixer_agent(world)
        limits = Limits(command_timeout_s=60, stall_timeout_s=30, memory_mb=1024, budget_usd=0.01)
        spec = world.spec(
            {Step.FIX: f"agent {agent.name}", Step.VERIFY: PYTEST}, fixer_agent=agent.name, limits=limits
        )
        loop_id, result = await world.run(spec)
        reports = await world.reports(loop_id)

    assert result.status is LoopStatus.BUDGET_EXHAUSTED, result.reason
    assert result.reason == f"{agent.name} spent the loop's budget ($0.0150 of $0.01) in 2 round(s)"
    assert "raise limits.budget" in result.next_action
    assert [r.round for r in reports] == [1, 2]  # no third round started
    fix = reports[1].commands[0]
    assert fix.step is Step.FIX and fix.outcome is Outcome.FAILED
    # The child's own ceiling was what the loop had left: all of its budget.
    assert fix.reason == "BUDGET_EXHAUSTED: spent $0.015 of its $0.01 per-task budget"
    assert len(api.requests) == 1  # the child stopped at its slice of the budget
    assert reports[1].failing_tests == [FAILING]  # its second, fixing call never happened
