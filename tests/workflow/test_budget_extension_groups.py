"""A member of an approver group may extend a paused task's budget, as they may approve: the
task resolves its approvers with the real `openloop.approval.prepare` activity (the fake
Slack Web API answers the group's members, real Postgres the usage) and applies the approval
rule to an extension sent as every surface sends one (`surfaces.decisions.decide`: the
`openloop.task.decide` update), and to the `extend_budget` signal, still accepted. On the
time-skipping server, the model scripted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from pydantic import SecretStr
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities import runtime as activity_runtime
from activities.approval_activities import prepare_approval
from config.settings import Settings
from surfaces.decisions import decide
from surfaces.timeline import Story, story_from_history
from tests.fakes.slack_api import FakeSlack
from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import agent_yaml, start, task_input
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import BudgetExtension, Decision, TaskResult, TaskStatus

TOKEN = "xoxb-budget-groups"
Handle = WorkflowHandle[AgentTaskWorkflow, TaskResult]


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        server.set_usergroup("S0MAINTAINERS", ["U_CAROL"], handle="maintainers")
        yield server


@asynccontextmanager
async def paused_task(
    ts_env: WorkflowEnvironment, task_queue: str, db_settings: Settings, fake: FakeSlack
) -> AsyncIterator[Handle]:
    """A task of an agent approved by @maintainers, paused by its budget, on a running worker."""
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
        yield handle


async def story_of(handle: Handle) -> Story:
    return story_from_history([e async for e in handle.fetch_history_events()])


async def test_a_group_member_extends_through_the_decision_update_and_an_outsider_hears_why_not(
    ts_env: WorkflowEnvironment, task_queue: str, db_settings: Settings, fake: FakeSlack
) -> None:
    url = db_settings.database_url
    async with paused_task(ts_env, task_queue, db_settings, fake) as handle:
        outsider = await decide(handle, url, Decision(extend=BudgetExtension(by="U_MALLORY", usd=1.0)))
        assert (outsider.counted, outsider.problem) == (False, "not_approver")
        assert outsider.reason == "U_MALLORY is not an approver of this agent"
        assert outsider.approvers == ["S0MAINTAINERS"]  # as the agent lists them
        assert (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_BUDGET
        nothing = await decide(handle, url, Decision(extend=BudgetExtension(by="U_CAROL")))
        assert (nothing.counted, nothing.problem) == (False, "invalid")

        member = await decide(handle, url, Decision(extend=BudgetExtension(by="U_CAROL", usd=0.5)))
        assert member.counted and member.reason == "" and member.audit is None
        result = await handle.result()
        steps = (await handle.query(AgentTaskWorkflow.explain)).steps  # a query needs the worker
    assert result.status == TaskStatus.SUCCESS and result.reply == "All done."
    assert any(s.summary.startswith("U_CAROL extended the budget by $0.50") for s in steps)
    assert not any("U_MALLORY" in s.summary for s in steps)
    # Refused at the door: nothing of Mallory's in the history, the refusal in the audit log.
    story = await story_of(handle)
    assert not [e for e in story.entries if e.who == "U_MALLORY"]
    told = [e.what for e in story.entries if e.who == "U_CAROL"]
    assert told and told[0].startswith("extend budget from U_CAROL: +$0.50")
    assert db_settings.database_url is not None
    with psycopg.connect(db_settings.database_url) as conn:
        rows = conn.execute(
            "SELECT approver, outcome FROM audit_log WHERE task_id = %s AND kind = 'budget_extension_refused'"
            " ORDER BY id",
            (handle.id,),
        ).fetchall()
    assert rows == [
        ("U_MALLORY", "U_MALLORY is not an approver of this agent"),
        ("U_CAROL", "an extension adds to the budget and takes nothing away"),
    ]


async def test_the_extend_budget_signal_is_still_accepted_by_the_same_rule(
    ts_env: WorkflowEnvironment, task_queue: str, db_settings: Settings, fake: FakeSlack
) -> None:
    async with paused_task(ts_env, task_queue, db_settings, fake) as handle:
        await handle.signal(AgentTaskWorkflow.extend_budget, BudgetExtension(by="U_MALLORY", usd=1.0))
        await asyncio.sleep(0.3)
        assert (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_BUDGET
        await handle.signal(AgentTaskWorkflow.extend_budget, BudgetExtension(by="U_CAROL", usd=0.5))
        result = await handle.result()
        steps = (await handle.query(AgentTaskWorkflow.explain)).steps
        story = await story_of(handle)
    assert result.status == TaskStatus.SUCCESS and result.reply == "All done."
    said = [s.summary for s in steps]
    assert "budget extension by U_MALLORY ignored: not an approver" in said
    assert any(line.startswith("U_CAROL extended the budget by $0.50") for line in said)
    # The timeline (`openloop tasks timeline`, the dashboard) tells it by the same rule.
    told = {(e.who, e.kind): e.what for e in story.entries if e.who in ("U_MALLORY", "U_CAROL")}
    assert told[("U_MALLORY", "refused")] == "budget extension from U_MALLORY ignored: not an approver"
    assert told[("U_CAROL", "signal")].startswith("extend budget from U_CAROL: +$0.50")
