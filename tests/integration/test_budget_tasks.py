"""Monthly budgets end to end: real tasks, the real model activity (LiteLLM against a local
OpenAI-compatible server), the real budget workflow, on the Temporal dev server with real
Postgres. Twenty tasks start together against a cap that fits about five calls."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from activities.llm.model_activities import call_model
from activities.providers import price_per_token
from activities.runtime import runtime
from activities.store.store_activities import save_task_constants
from activities.tools.catalog import specs_for
from config.loader import parse_agent
from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI, Recorded, Scripted
from tests.integration.conftest import serving
from tests.workflow.scripted import Script
from workers.sandbox import workflow_runner
from workflows.agent_budget import AgentBudgetWorkflow
from workflows.agent_task import AgentTaskWorkflow
from workflows.budget_types import BudgetSnapshot, budget_workflow_id
from workflows.types import PostReplyInput, SurfaceContext, TaskInput, TaskResult, TaskStatus

MODEL = "openai/gpt-4o-mini"
MAX_OUTPUT = 4000
AGENT = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {{name: {name}}}
spec:
  model_policy: {{default: openai/gpt-4o-mini, max_output_tokens: 4000}}
  approvals: {{approvers: [U_ALICE], ttl: 2s}}  # how long a refused task waits for more budget
  budget: {{monthly_usd: {cap}, on_exceeded: {mode}}}
"""


class FullLengthAPI(FakeModelAPI):
    """Every answer uses all the output tokens it may: each call costs about its worst case."""

    def _completion(self, entry: Scripted, recorded: Recorded) -> dict[str, Any]:
        entry.completion_tokens = int(recorded.body["max_tokens"])
        entry.delay = 0.3  # calls overlap, so holds are in flight together
        return super()._completion(entry, recorded)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, db_settings: Settings) -> Iterator[FakeModelAPI]:
    yield from serving(FullLengthAPI(), monkeypatch)


@dataclass
class Run:
    results: list[TaskResult]
    budget: BudgetSnapshot
    replies: list[PostReplyInput]


def worst_output_usd() -> float:
    prices = price_per_token(MODEL)
    assert prices is not None
    return MAX_OUTPUT * prices[1]


async def run_tasks(client: Client, task_queue: str, cap: float, mode: str, n: int) -> Run:
    script = Script([])
    agent = parse_agent(AGENT.format(name=f"budget-{uuid.uuid4().hex[:6]}", cap=cap, mode=mode))
    context = SurfaceContext("slack", "C1", "U_BOB")
    tools = specs_for(agent)
    inputs = [
        TaskInput(f"task-{uuid.uuid4().hex[:10]}", agent, 1, context, f"q{i}", tools=tools) for i in range(n)
    ]
    stand_ins = script.activities()[2:]  # everything but the model and its row: the real ones run
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow, AgentBudgetWorkflow],
        activities=[call_model, save_task_constants, *stand_ins],
        workflow_runner=workflow_runner(),
        max_concurrent_activities=n,
    ):
        handles = await asyncio.gather(
            *(
                client.start_workflow(AgentTaskWorkflow.run, i, id=i.task_id, task_queue=task_queue)
                for i in inputs
            )
        )
        results = await asyncio.gather(*(h.result() for h in handles))
        budget = client.get_workflow_handle_for(
            AgentBudgetWorkflow.run, budget_workflow_id(agent.workspace, agent.name)
        )
        snapshot = await budget.query(AgentBudgetWorkflow.snapshot)
        await budget.terminate()
    return Run(results, snapshot, script.replies)


async def ledger_usd(task_ids: list[str]) -> float:
    pool = await runtime().pool()
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT coalesce(sum(cost_usd), 0) AS usd FROM usage_ledger WHERE task_id = ANY(%s)", (task_ids,)
        )
        row = cast(dict[str, Any] | None, await cursor.fetchone())
    assert row is not None
    return float(row["usd"])


async def test_twenty_tasks_against_a_cap_for_five(
    client: Client, task_queue: str, api: FakeModelAPI
) -> None:
    cap = round(5.2 * worst_output_usd(), 6)
    run = await run_tasks(client, task_queue, cap, "block", 20)
    done = [r for r in run.results if r.status == TaskStatus.SUCCESS]
    exhausted = [r for r in run.results if r.status == TaskStatus.BUDGET_EXHAUSTED]
    spent = await ledger_usd([r.task_id for r in run.results])
    # Five fit at full length; after them each task is offered only what the cap leaves (at
    # least 16 tokens), so how many more finish depends on how the calls overlap. What must
    # hold whatever the timing: the cap blocks the rest, and the spend never passes it.
    assert len(done) >= 5 and exhausted and len(done) + len(exhausted) == 20
    assert spent <= cap + 1e-9 and run.budget.spent_usd == pytest.approx(spent)
    assert run.budget.reserved_usd == 0 and len(api.requests) == len(done)
    assert all(r.body["max_tokens"] >= 16 for r in api.requests)
    assert "the agent's monthly budget of" in exhausted[0].reason
    told = [r.text for r in run.replies if r.status == TaskStatus.BUDGET_EXHAUSTED]
    assert told and "monthly budget" in told[0]


async def test_warn_lets_tasks_through_and_audits_the_overrun(
    client: Client, task_queue: str, api: FakeModelAPI
) -> None:
    cap = round(2.5 * worst_output_usd(), 6)
    run = await run_tasks(client, task_queue, cap, "warn", 6)
    assert all(r.status == TaskStatus.SUCCESS for r in run.results)
    pool = await runtime().pool()
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT outcome FROM audit_log WHERE kind = 'budget_overrun' AND task_id = ANY(%s)",
            ([r.task_id for r in run.results],),
        )
        audits = cast(list[dict[str, Any]], await cursor.fetchall())
    assert len(audits) >= 3 and "on_exceeded: warn" in audits[0]["outcome"]
    assert run.budget.overrun_usd > 0 and run.budget.spent_usd > cap
