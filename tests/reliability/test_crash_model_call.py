"""A worker SIGKILLed while the model is answering: after a second worker takes over, the
task has one model result in its history, the call is charged once (one usage row, one
settlement in the agent's monthly budget), and the crashed attempt's budget hold is
released once. The retried attempt asks the model again, because the first one never
stored an answer; what is paid for is the answer that was stored.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.fakes.model_api import FakeModelAPI
from tests.helpers import eventually_async
from tests.reliability.harness import (
    FAKE_OPENAI_KEY,
    WorkerForker,
    agent_config,
    scalar,
    start,
    stored,
    worker_env,
)
from workers.embedded import TemporalDevServer
from workers.history import replay
from workflows.agent_budget import AgentBudgetWorkflow
from workflows.budget_types import BudgetInput, budget_workflow_id
from workflows.types import ActivityName, TaskStatus

HOLD_TTL_SECONDS = 3.0  # the crashed attempt's hold is released after this


async def test_worker_killed_during_a_model_call_is_charged_once(
    client: Client,
    dev_server: TemporalDevServer,
    pg_url: str,
    task_queue: str,
    tmp_path: Path,
    forker: WorkerForker,
) -> None:
    fake = FakeModelAPI().start()
    fake.answer("An answer nobody receives.", delay=30)  # held until the worker is dead
    fake.answer("Deploys are on Tuesdays.")
    env = worker_env(
        dev_server.address,
        pg_url,
        task_queue,
        tmp_path,
        OPENLOOP_MODEL_API_BASE=fake.base_url,
        OPENAI_API_KEY=FAKE_OPENAI_KEY,
    )
    first = await forker.spawn("first", env, tmp_path)
    second = None
    budget = None
    try:
        await first.ready()
        agent = await stored(pg_url, agent_config(budget={"monthly_usd": 5.0}))
        budget = await client.start_workflow(
            AgentBudgetWorkflow.run,
            BudgetInput(agent.workspace, agent.name, reservation_ttl_seconds=HOLD_TTL_SECONDS),
            id=budget_workflow_id(agent.workspace, agent.name),
            task_queue=task_queue,
        )
        handle = await start(client, task_queue, agent, "Which day do we deploy?")
        await eventually_async(lambda: len(fake.requests) == 1, "the model request to arrive", 60)
        await first.kill()
        second = await forker.spawn("second", env, tmp_path)
        result = await asyncio.wait_for(handle.result(), 60)

        assert result.status == TaskStatus.SUCCESS, result.reason
        assert result.reply == "Deploys are on Tuesdays."
        assert len(fake.requests) == 2  # asked again: the first answer was never stored
        ledger = "SELECT count(*), sum(cost_usd) FROM usage_ledger WHERE task_id = %s"
        assert await scalar(pg_url, ledger.replace(", sum(cost_usd)", ""), handle.id) == 1
        cost = await scalar(pg_url, "SELECT sum(cost_usd) FROM usage_ledger WHERE task_id = %s", handle.id)
        assert cost > 0 and result.usage.cost_usd == pytest.approx(cost)
        answers = "SELECT count(*) FROM transcript WHERE task_id = %s AND role = 'assistant'"
        assert await scalar(pg_url, answers, handle.id) == 1

        history = await handle.fetch_history()
        scheduled = [
            e
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == ActivityName.CALL_MODEL
        ]
        completed = [e for e in history.events if e.HasField("activity_task_completed_event_attributes")]
        starts = [e for e in history.events if e.HasField("activity_task_started_event_attributes")]
        assert len(scheduled) == 1 and len(completed) >= 1
        model_start = next(
            e
            for e in starts
            if e.activity_task_started_event_attributes.scheduled_event_id == scheduled[0].event_id
        )
        assert model_start.activity_task_started_event_attributes.attempt == 2
        [report] = await replay([history])  # a history with a crash in it replays too
        assert report.ok, report.error

        async def hold_released() -> bool:
            view = await budget.query(AgentBudgetWorkflow.snapshot)  # type: ignore[union-attr]
            return view.active_holds == 0

        await eventually_async(hold_released, "the crashed attempt's hold to be released", 30)
        view = await budget.query(AgentBudgetWorkflow.snapshot)
        assert view.reserved_usd == 0
        assert view.spent_usd == pytest.approx(cost)  # settled once; the dead hold cost nothing
        assert FAKE_OPENAI_KEY not in first.log() + second.log()  # nor in the workers' logs
    finally:
        for worker in (first, second):
            if worker is not None:
                await worker.kill()
        fake.stop()
        if budget is not None:
            await budget.terminate()
