"""A member of an approver group may extend a paused task's budget, as they may approve: the
task resolves its approvers with the real `openloop.approval.prepare` activity (the fake
Slack Web API answers the group's members, real Postgres the usage) and applies the approval
rule to the `extend_budget` signal. On the time-skipping server, the model scripted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities import runtime as activity_runtime
from activities.approval_activities import prepare_approval
from config.settings import Settings
from surfaces.timeline import story_from_history
from tests.fakes.slack_api import FakeSlack
from tests.workflow.scripted import Script, say, use
from tests.workflow.test_approvals import start, task_input
from tests.workflow.test_ceilings import agent_yaml
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import BudgetExtension, TaskStatus

TOKEN = "xoxb-budget-groups"


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        server.set_usergroup("S0MAINTAINERS", ["U_CAROL"], handle="maintainers")
        yield server


async def test_a_member_of_an_approver_group_may_extend_the_budget(
    ts_env: WorkflowEnvironment, task_queue: str, db_settings: Settings, fake: FakeSlack
) -> None:
    activity_runtime.configure(
        db_settings.model_copy(update={"slack_bot_token": SecretStr(TOKEN), "slack_api_url": fake.base_url})
    )
    script = Script(
        [
            use("memory.search", '{"query": "a"}', "c1", cost=0.006),
            use("memory.search", '{"query": "b"}', "c2", cost=0.006),
            say("All done.", cost=0.001),
        ]
    )
    scripted = [a for a in script.activities() if a.__name__ != "prepare_approval"]
    agent = agent_yaml(usd=0.01).replace("approvers: [U_ALICE]", "approvers: [S0MAINTAINERS]")
    async with Worker(
        ts_env.client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=[*scripted, prepare_approval],
        workflow_runner=workflow_runner(),
    ):
        handle = await start(ts_env, task_input(agent), task_queue)
        for _ in range(200):
            if (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_BUDGET:
                break
            await asyncio.sleep(0.05)
        assert (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_BUDGET
        assert [c.args["usergroup"] for c in fake.calls if c.method == "usergroups.users.list"] == [
            "S0MAINTAINERS"
        ]

        await handle.signal(AgentTaskWorkflow.extend_budget, BudgetExtension(by="U_MALLORY", usd=1.0))
        await asyncio.sleep(0.3)
        assert (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_BUDGET
        await handle.signal(AgentTaskWorkflow.extend_budget, BudgetExtension(by="U_CAROL", usd=0.5))
        result = await handle.result()
        steps = (await handle.query(AgentTaskWorkflow.explain)).steps  # a query needs the worker
        story = story_from_history([e async for e in handle.fetch_history_events()])
    assert result.status == TaskStatus.SUCCESS and result.reply == "All done."
    said = [s.summary for s in steps]
    assert "budget extension by U_MALLORY ignored: not an approver" in said
    assert any(line.startswith("U_CAROL extended the budget by $0.50") for line in said)
    # The timeline (`openloop tasks timeline`, the dashboard) tells it by the same rule.
    told = {(e.who, e.kind): e.what for e in story.entries if e.who in ("U_MALLORY", "U_CAROL")}
    assert told[("U_MALLORY", "refused")] == "budget extension from U_MALLORY ignored: not an approver"
    assert told[("U_CAROL", "signal")].startswith("extend budget from U_CAROL: +$0.50")
