"""Monthly-budget holds of calls that fail: a provider error releases the attempt's hold at
once, the retry reserves and settles its own, and the budget ends up charged exactly the one
answer that was stored; a call that fails for good leaves nothing held and nothing spent.
(A hold whose worker died is released after its TTL: test_crash_model_call.py.)
"""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client, WorkflowHandle

from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI
from tests.reliability.harness import agent_config, scalar, start, stored
from workers.worker import build_worker
from workflows.agent_budget import AgentBudgetWorkflow
from workflows.budget_types import budget_workflow_id
from workflows.types import TaskStatus


@pytest.mark.parametrize("failure", [500, 401], ids=["retried", "final"])
async def test_a_failed_call_releases_its_hold_and_the_budget_is_charged_once(
    client: Client, settings: Settings, task_queue: str, model: FakeModelAPI, failure: int
) -> None:
    url = settings.require_database_url()
    agent = await stored(url, agent_config(budget={"monthly_usd": 5.0}))
    model.fail(failure)
    model.answer("Tuesdays.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Which day do we deploy?")
        result = await asyncio.wait_for(handle.result(), 60)
        budget: WorkflowHandle[AgentBudgetWorkflow, None] = client.get_workflow_handle_for(
            AgentBudgetWorkflow.run, budget_workflow_id(agent.workspace, agent.name)
        )
        view = await budget.query(AgentBudgetWorkflow.snapshot)
        await budget.terminate()
    spent = "SELECT coalesce(sum(cost_usd), 0) FROM usage_ledger WHERE task_id = %s"
    cost = await scalar(url, spent, handle.id)
    assert view.reserved_usd == 0 and view.active_holds == 0  # nothing left held
    assert view.spent_usd == pytest.approx(cost)  # charged what was stored, once
    if failure == 500:
        assert result.status == TaskStatus.SUCCESS and len(model.requests) == 2 and cost > 0
    else:
        assert result.status == TaskStatus.ERROR and len(model.requests) == 1 and cost == 0
