"""`openloop approve`, `deny` and `extend` against the real dev server and Postgres: the task's
decision update judges each one, so a member of an approver group is accepted (the CLI
checks nothing against the listed approvers) and anyone else hears why not, at once.

The task runs the real workflow with scripted stand-in activities; the approvers' user group
is resolved by a stand-in registered under the real `openloop.approval.prepare` name.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker
from typer.testing import CliRunner, Result

from activities.store.db import get_pool
from activities.tools.catalog import specs_for
from config.loader import parse_agent
from surfaces.cli.main import app
from tests.helpers import pending_approval
from tests.workflow.record_histories import ISSUE_ARGS, ISSUES_YAML
from tests.workflow.scripted import Script, say, use
from workers.embedded import TemporalDevServer
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.message_types import PrepareApprovalInput, PrepareApprovalResult
from workflows.types import ActivityName, SurfaceContext, TaskInput, TaskResult, TaskStatus

Handle = WorkflowHandle[AgentTaskWorkflow, TaskResult]
GROUPS = {"S0TRIAGE": ["U_CAROL", "U_DAN"]}


@activity.defn(name=ActivityName.PREPARE_APPROVAL)
async def prepare_approval(inp: PrepareApprovalInput) -> PrepareApprovalResult:
    """The real activity reads the group's members from Slack; this one knows them."""
    return PrepareApprovalResult([m for a in inp.approvers for m in GROUPS.get(a, [a])], 0.0)


@pytest.fixture
def script() -> Script:
    return Script([use("github.create_issue", ISSUE_ARGS, "c1"), say("Filed it.")])


@pytest.fixture
async def waiting(client: Client, task_queue: str, script: Script) -> AsyncIterator[Handle]:
    """A task of an agent approved by the group S0TRIAGE, waiting for an approval."""
    activities = [a for a in script.activities() if a.__name__ != "prepare_approval"]
    config = parse_agent(
        ISSUES_YAML.replace("{name: triage}", f"{{name: triage-{uuid.uuid4().hex[:8]}}}").replace(
            "approvers: [U_ALICE]", "approvers: [S0TRIAGE]"
        )
    )
    inp = TaskInput(
        task_id=f"task-cli-approve-{uuid.uuid4().hex[:10]}",
        agent=config,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="ops", user="U_BOB"),
        request="open an issue for the flaky deploy step",
        tools=specs_for(config),
    )
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=[*activities, prepare_approval],
        workflow_runner=workflow_runner(),
    ):
        handle = await client.start_workflow(
            AgentTaskWorkflow.run, inp, id=inp.task_id, task_queue=task_queue
        )
        await pending_approval(handle)
        yield handle


async def openloop(dev_server: TemporalDevServer, pg_url: str, *args: str) -> Result:
    env = {"OPENLOOP_TEMPORAL_ADDRESS": dev_server.address, "OPENLOOP_DATABASE_URL": pg_url, "COLUMNS": "250"}
    return await asyncio.to_thread(lambda: CliRunner().invoke(app, list(args), env=env))


async def audited(pg_url: str, task_id: str) -> list[tuple[str, str, str]]:
    pool = await get_pool(pg_url)
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT kind, approver, outcome FROM audit_log WHERE task_id = %s AND kind LIKE '%%_refused'"
            " ORDER BY id",
            (task_id,),
        )
        return [(row["kind"], row["approver"], row["outcome"]) for row in await cursor.fetchall()]


async def test_a_group_member_approves_from_the_cli_and_an_outsider_hears_why_not(
    waiting: Handle, script: Script, dev_server: TemporalDevServer, pg_url: str
) -> None:
    outsider = await openloop(dev_server, pg_url, "approve", waiting.id, "--as", "U_BOB")
    assert outsider.exit_code == 1, outsider.output
    reason = "U_BOB is not an approver of this agent"
    assert f"Not counted: {reason}; approvers: S0TRIAGE" in outsider.output
    assert (await waiting.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_APPROVAL

    # Carol is in S0TRIAGE, which the agent lists: the task takes her decision.
    member = await openloop(dev_server, pg_url, "approve", waiting.id, "--as", "U_CAROL")
    assert member.exit_code == 0, member.output
    assert "Approved github.create_issue" in member.output and "as U_CAROL." in member.output
    result = await waiting.result()
    assert result.status == TaskStatus.SUCCESS, result.reason
    ran = [call for call in script.tool_calls if call.tool == "github.create_issue"]
    assert ran and ran[-1].approval is not None and ran[-1].approval.approver == "U_CAROL"
    assert await audited(pg_url, waiting.id) == [("approval_refused", "U_BOB", reason)]


async def test_a_deny_and_an_extension_from_outside_the_group_do_not_count(
    waiting: Handle, dev_server: TemporalDevServer, pg_url: str
) -> None:
    denied = await openloop(dev_server, pg_url, "deny", waiting.id, "--as", "U_MALLORY")
    assert denied.exit_code == 1, denied.output
    assert "Not counted: U_MALLORY is not an approver of this agent" in denied.output
    extended = await openloop(dev_server, pg_url, "extend", waiting.id, "--usd", "1", "--as", "U_MALLORY")
    assert extended.exit_code == 1, extended.output
    assert "Not counted: U_MALLORY is not an approver of this agent; approvers: S0TRIAGE" in extended.output
    assert (await waiting.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_APPROVAL
    reason = "U_MALLORY is not an approver of this agent"
    assert await audited(pg_url, waiting.id) == [
        ("approval_refused", "U_MALLORY", reason),
        ("budget_extension_refused", "U_MALLORY", reason),
    ]
    await waiting.terminate("test over")


async def test_with_no_worker_running_a_decision_is_not_confirmed_and_the_cli_says_so(
    client: Client, task_queue: str, dev_server: TemporalDevServer, pg_url: str
) -> None:
    config = parse_agent(ISSUES_YAML)
    inp = TaskInput(
        task_id=f"task-cli-approve-{uuid.uuid4().hex[:10]}",
        agent=config,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="ops", user="U_BOB"),
        request="open an issue",
        tools=specs_for(config),
    )
    handle = await client.start_workflow(AgentTaskWorkflow.run, inp, id=inp.task_id, task_queue=task_queue)
    sent = await openloop(dev_server, pg_url, "extend", handle.id, "--usd", "1", "--as", "U_ALICE")
    await handle.terminate("test over")
    assert sent.exit_code == 1, sent.output
    assert "Not confirmed: the task did not answer within 5 s (is a worker running?)" in sent.output
