"""The dashboard's pages and permissions against the real dev server and Postgres.

Tasks run the real workflow with scripted stand-in activities on an in-process worker; the
app is the real surfaces app (`create_app`), driven over ASGI. People sign in with login
tokens minted as `openloop up` mints them; names are unique per test, because the dev server
and the database are shared by the whole session.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest
from markupsafe import escape
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from activities.store.agents import apply_agent
from activities.store.db import get_pool
from activities.store.ledger import UsageRow, write_usage
from activities.store.memory import remember
from activities.store.store_activities import record_audit
from config.loader import parse_agent
from config.settings import Settings
from surfaces.app import create_app
from surfaces.web import task_view
from surfaces.web.auth import login_token
from tests.helpers import Handle, pending_approval
from tests.integration.dashboard_env import D, sign_in, start_dashboard_task
from tests.workflow.record_histories import HELPER_YAML, ISSUE_ARGS, ISSUES_YAML, SEARCH_ARGS
from tests.workflow.scripted import Script, say, use
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.message_types import PrepareApprovalInput, PrepareApprovalResult
from workflows.policy import memory_scope
from workflows.types import ActivityName, SurfaceContext, TaskStatus


@dataclass
class Tasks:
    suffix: str
    channel: str
    answered: Handle  # a tool call, then an answer: SUCCESS
    waiting: Handle  # waiting for U_ALICE to approve github.create_issue
    script: Script


@pytest.fixture
async def tasks(client: Client, task_queue: str) -> AsyncIterator[Tasks]:
    suffix = uuid.uuid4().hex[:8]
    script = Script(
        [],
        default=lambda inp: (
            say("Tuesdays.", (210, 15), 0.0004)
            if inp.step > 1
            else use(
                "github.create_issue" if inp.task.agent_name.startswith("triage") else "memory.search",
                ISSUE_ARGS if inp.task.agent_name.startswith("triage") else SEARCH_ARGS,
                "c1",
                (150, 20),
                0.0003,
            )
        ),
    )
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=script.activities(),
        workflow_runner=workflow_runner(),
    )
    channel = f"eng-{suffix}"
    async with worker:
        answered = await start_dashboard_task(client, HELPER_YAML, f"helper-{suffix}", channel, task_queue)
        waiting = await start_dashboard_task(client, ISSUES_YAML, f"triage-{suffix}", channel, task_queue)
        assert (await answered.result()).status == TaskStatus.SUCCESS
        await pending_approval(waiting)
        yield Tasks(suffix, channel, answered, waiting, script)
        if (await waiting.describe()).status == WorkflowExecutionStatus.RUNNING:
            await waiting.terminate("test over")


@pytest.fixture
async def web(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dash.test") as http:
        http.app_settings = settings  # type: ignore[attr-defined]
        yield http


async def until_listed(http: httpx.AsyncClient, expected: str, **params: str) -> str:
    """Visibility is eventually consistent: list until `expected` shows."""
    for _ in range(50):
        page = await http.get(f"{D}/tasks", params=params)
        assert page.status_code == 200, page.text
        if expected in page.text:
            return page.text
        await asyncio.sleep(0.2)
    raise AssertionError(f"{expected!r} never listed:\n{page.text}")


async def test_sign_in_is_one_time_and_every_page_needs_it(
    web: httpx.AsyncClient, settings: Settings
) -> None:
    for path in ("/tasks", "/approvals", "/spend", "/memory", "/agents", "/tasks/x/events"):
        assert (await web.get(f"{D}{path}")).status_code == 401
    token = login_token(settings, "U_ALICE", "viewer")
    first = await web.get(f"{D}/login", params={"token": token})
    assert first.status_code == 303 and "httponly" in first.headers["set-cookie"].lower()
    assert (await web.get(f"{D}/agents")).status_code == 200
    web.cookies.clear()
    assert (await web.get(f"{D}/login", params={"token": token})).status_code == 401  # used once
    assert (await web.get(f"{D}/login", params={"token": token[:-3] + "abc"})).status_code == 401
    web.cookies.set("openloop_dashboard", "forged.cookie.value", domain="dash.test", path=D)
    assert (await web.get(f"{D}/tasks")).status_code == 401
    assert (await web.get(D)).headers["location"] == f"{D}/tasks"


async def test_tasks_list_filters_pages_and_shows_a_task(
    web: httpx.AsyncClient, tasks: Tasks, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sign_in(web, "U_CAROL", "viewer")
    helper = f"helper-{tasks.suffix}"
    listed = await until_listed(web, tasks.answered.id, agent=helper)
    assert tasks.waiting.id not in listed and "SUCCESS" in listed and "$0.0007" in listed
    assert f"OpenLoopAgent = &#39;{helper}&#39;" in listed
    waiting = await until_listed(web, tasks.waiting.id, status="waiting_approval", channel=tasks.channel)
    assert tasks.answered.id not in waiting and "WAITING_APPROVAL" in waiting
    assert (await web.get(f"{D}/tasks", params={"agent": "x' OR 1=1"})).status_code == 400

    monkeypatch.setattr(task_view, "PAGE_SIZE", 1)
    first = await web.get(f"{D}/tasks", params={"channel": tasks.channel})
    next_link = re.search(r'href="\?channel=[^"]*page=([^"]+)">Next page', first.text)
    assert next_link, first.text
    second = await web.get(
        f"{D}/tasks",
        params={"channel": tasks.channel, "page": httpx.QueryParams(f"p={next_link.group(1)}")["p"]},
    )
    ids = {tasks.answered.id, tasks.waiting.id}
    assert {i for i in ids if i in first.text} | {i for i in ids if i in second.text} == ids
    assert not ({i for i in ids if i in first.text} & {i for i in ids if i in second.text})

    page = await web.get(f"{D}/tasks/{tasks.answered.id}")
    assert page.status_code == 200
    for shown in (
        "memory.search",
        "Tuesdays.",
        "scripted/model",
        "SUCCESS",
        "/namespaces/default/workflows/",
    ):
        assert shown in page.text, shown
    assert "data-live" not in page.text  # finished: nothing to follow
    live = await web.get(f"{D}/tasks/{tasks.waiting.id}")
    assert "WAITING_APPROVAL" in live.text and f'data-live="{D}/tasks/{tasks.waiting.id}/events"' in live.text
    events = await web.get(f"{D}/tasks/{tasks.answered.id}/events")
    assert events.headers["content-type"].startswith("text/event-stream")
    assert "event: update" in events.text and "Tuesdays." in events.text and "event: done" in events.text
    missing = await web.get(f"{D}/tasks/task-nope-{tasks.suffix}")
    assert missing.status_code == 404 and "<html" in missing.text and "no task task-nope-" in missing.text


async def _decide(
    http: httpx.AsyncClient, tasks: Tasks, csrf: str | None, decision: str = "approve"
) -> httpx.Response:
    pending = (await tasks.waiting.query(AgentTaskWorkflow.status)).pending_approval
    assert pending is not None
    form = {"request_id": pending.request_id, "action_id": pending.action_id, "decision": decision}
    if csrf is not None:
        form["csrf"] = csrf
    return await http.post(f"{D}/approvals/{tasks.waiting.id}", data=form)


async def test_a_viewer_cannot_approve(web: httpx.AsyncClient, tasks: Tasks) -> None:
    csrf = await sign_in(web, "U_ALICE", "viewer")  # named by the agent, but only a viewer
    inbox = await web.get(f"{D}/approvals")
    assert "only approvers decide" in inbox.text and tasks.waiting.id not in inbox.text
    refused = await _decide(web, tasks, csrf)
    assert refused.status_code == 403 and "cannot approve" in refused.text
    assert (await tasks.waiting.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_APPROVAL


async def test_an_approver_decides_only_for_agents_naming_them(
    web: httpx.AsyncClient, tasks: Tasks, pg_url: str
) -> None:
    csrf = await sign_in(web, "U_BOB", "approver")
    inbox = await web.get(f"{D}/approvals")
    assert tasks.waiting.id not in inbox.text and "wait for other approvers" in inbox.text
    # The task's own verdict, at once: refused, with the reason and who may decide.
    reason = "U_BOB is not an approver of this agent"
    refused = await _decide(web, tasks, csrf)
    assert refused.status_code == 403 and f"Not counted: {reason}; its approvers: U_ALICE" in refused.text
    assert (await tasks.waiting.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_APPROVAL
    # Refused at the door, so not in the task's history: audited, and in its timeline from there.
    assert await refusals(pg_url, tasks.waiting.id, "U_BOB") == [("approval_refused", reason)]
    page = await web.get(f"{D}/tasks/{tasks.waiting.id}")
    assert f"approve from U_BOB refused: {reason}" in page.text, page.text
    assert (await tasks.waiting.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_APPROVAL


async def refusals(pg_url: str, task_id: str, approver: str) -> list[tuple[str, str]]:
    pool = await get_pool(pg_url)
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT kind, outcome FROM audit_log WHERE task_id = %s AND approver = %s ORDER BY id",
            (task_id, approver),
        )
        return [(row["kind"], row["outcome"]) for row in await cursor.fetchall()]


async def test_a_member_of_an_approver_group_approves_from_the_inbox_and_an_outsider_hears_why_not(
    web: httpx.AsyncClient, client: Client, task_queue: str, pg_url: str
) -> None:
    suffix = uuid.uuid4().hex[:8]
    script = Script([use("github.create_issue", ISSUE_ARGS, "c1"), say("Filed it.")])

    # The real activity reads the group's members from Slack; this one knows them.
    @activity.defn(name=ActivityName.PREPARE_APPROVAL)
    async def prepare_approval(inp: PrepareApprovalInput) -> PrepareApprovalResult:
        groups = {"S0TRIAGE": ["U_CAROL", "U_DAN"]}
        return PrepareApprovalResult([m for a in inp.approvers for m in groups.get(a, [a])], 0.0)

    activities = [a for a in script.activities() if a.__name__ != "prepare_approval"]
    grouped = ISSUES_YAML.replace("approvers: [U_ALICE]", "approvers: [S0TRIAGE]")
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=[*activities, prepare_approval],
        workflow_runner=workflow_runner(),
    ):
        waiting = await start_dashboard_task(client, grouped, f"triage-{suffix}", f"eng-{suffix}", task_queue)
        pending = await pending_approval(waiting)
        form = {"request_id": pending.request_id, "action_id": pending.action_id, "decision": "approve"}

        csrf = await sign_in(web, "U_BOB", "approver")
        refused = await web.post(f"{D}/approvals/{waiting.id}", data={**form, "csrf": csrf})
        reason = "U_BOB is not an approver of this agent"
        assert refused.status_code == 403 and f"{reason}; its approvers: S0TRIAGE" in refused.text
        assert await refusals(pg_url, waiting.id, "U_BOB") == [("approval_refused", reason)]

        csrf = await sign_in(web, "U_CAROL", "approver")
        inbox = await web.get(f"{D}/approvals")
        assert waiting.id in inbox.text and 'name="approver" value="U_CAROL"' in inbox.text
        counted = await web.post(
            f"{D}/approvals/{waiting.id}", data={**form, "csrf": csrf, "approver": "U_CAROL"}
        )
        assert counted.status_code == 200 and "Approved by U_CAROL" in counted.text, counted.text
        assert (await waiting.result()).status == TaskStatus.SUCCESS
    ran = [call for call in script.tool_calls if call.tool == "github.create_issue"]
    assert ran and ran[-1].approval is not None and ran[-1].approval.approver == "U_CAROL"
    assert await refusals(pg_url, waiting.id, "U_CAROL") == []


async def test_a_forged_or_missing_csrf_token_is_refused(web: httpx.AsyncClient, tasks: Tasks) -> None:
    csrf = await sign_in(web, "U_ALICE", "approver")
    assert (await _decide(web, tasks, "forged-" + csrf)).status_code == 403
    assert (await _decide(web, tasks, None)).status_code == 403
    assert (await tasks.waiting.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_APPROVAL


async def test_an_approver_approves_from_the_inbox(web: httpx.AsyncClient, tasks: Tasks) -> None:
    csrf = await sign_in(web, "U_ALICE", "approver")
    inbox = await web.get(f"{D}/approvals")
    assert tasks.waiting.id in inbox.text
    for shown in ("github.create_issue", "Flaky deploy step", "acme/platform", "U_BOB", "Time left"):
        assert shown in inbox.text, shown
    counted = await _decide(web, tasks, csrf)
    assert counted.status_code == 200 and "Approved by U_ALICE" in counted.text, counted.text
    result = await tasks.waiting.result()
    assert result.status == TaskStatus.SUCCESS
    ran = [call for call in tasks.script.tool_calls if call.tool == "github.create_issue"]
    assert ran and ran[-1].approval is not None and ran[-1].approval.approver == "U_ALICE"
    again = await web.post(
        f"{D}/approvals/{tasks.waiting.id}",
        data={"csrf": csrf, "request_id": "r", "action_id": "a", "decision": "approve"},
        headers={"HX-Request": "true"},
    )
    assert again.status_code == 200 and "already finished" in again.text and "<html" not in again.text


async def test_spend_page_shows_budgets_burn_down_and_top_tasks(web: httpx.AsyncClient, pg_url: str) -> None:
    name = f"spender-{uuid.uuid4().hex[:8]}"
    yaml_text = HELPER_YAML.replace("{name: helper}", f"{{name: {name}}}").replace(
        "budget: {per_task_usd: 0.01}",
        "budget: {per_task_usd: 0.5, monthly_usd: 20, per_channel_monthly_usd: 5}",
    )
    pool = await get_pool(pg_url)
    await apply_agent(pool, parse_agent(yaml_text))
    async with pool.connection() as conn:
        for step, cost in ((1, 1.25), (2, 0.5)):
            await write_usage(
                conn,
                UsageRow(
                    f"task-{name}",
                    step,
                    name,
                    "default",
                    "C0SPEND",
                    "slack",
                    "openai/gpt-4o-mini",
                    100,
                    10,
                    cost,
                ),
            )
    await sign_in(web, "U_CAROL", "viewer")
    page = await web.get(f"{D}/spend", params={"agent": name})
    assert page.status_code == 200
    for shown in (
        f"default/{name}",
        "$1.7500",
        "$20.00",
        "$18.2500",
        "C0SPEND",
        "$5.00",
        "openai/gpt-4o-mini",
    ):
        assert shown in page.text, shown
    assert "<svg" in page.text and 'class="spend"' in page.text and 'class="budget"' in page.text
    assert f"task-{name}" in page.text and datetime.now(UTC).strftime("%B %Y") in page.text


async def test_memory_browse_search_and_forget_by_an_admin_only(web: httpx.AsyncClient, pg_url: str) -> None:
    name = f"rememberer-{uuid.uuid4().hex[:8]}"
    config = parse_agent(
        HELPER_YAML.replace("{name: helper}", f"{{name: {name}}}").replace(
            "approvals: {ttl: 1h}", "approvals: {ttl: 1h}\n  memory: {scope: agent}"
        )
    )
    pool = await get_pool(pg_url)
    await apply_agent(pool, config)
    scope = memory_scope(config, SurfaceContext(surface="cli", channel="cli", user="U_BOB"))
    memory_id, _ = await remember(pool, scope, "We deploy on Tuesdays.", f"task-{name}", 3, f"k-{name}")
    csrf = await sign_in(web, "U_CAROL", "viewer")
    listed = await web.get(f"{D}/memory", params={"agent": name})
    assert (
        "We deploy on Tuesdays." in listed.text and f"task-{name}" in listed.text and "step 3" in listed.text
    )
    assert "Forget</button>" not in listed.text
    found = await web.get(f"{D}/memory", params={"agent": name, "q": "when do we deploy"})
    assert "We deploy on Tuesdays." in found.text and "Searched agent" in found.text
    refused = await web.post(f"{D}/memory/{memory_id}/forget", data={"csrf": csrf})
    assert refused.status_code == 403
    csrf = await sign_in(web, "U_ADMIN", "admin")
    assert (await web.post(f"{D}/memory/{memory_id}/forget", data={"csrf": "nope"})).status_code == 403
    gone = await web.post(f"{D}/memory/{memory_id}/forget", data={"csrf": csrf, "reason": "stale"})
    assert gone.status_code == 303
    after = await web.get(gone.headers["location"])
    assert "We deploy on Tuesdays." not in after.text and f"Forgot memory {memory_id}" in after.text
    async with pool.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT actor FROM audit_log WHERE kind = 'memory_forgotten' AND key = %s",
                (f"memory.forget:{memory_id}",),
            )
        ).fetchone()
    assert row is not None and row["actor"] == "U_ADMIN"


async def test_agents_pages_show_versions_and_their_diff(web: httpx.AsyncClient, pg_url: str) -> None:
    name = f"versioned-{uuid.uuid4().hex[:8]}"
    base = HELPER_YAML.replace("{name: helper}", f"{{name: {name}}}")
    pool = await get_pool(pg_url)
    await apply_agent(pool, parse_agent(base))
    await apply_agent(pool, parse_agent(base.replace("per_task_usd: 0.01", "per_task_usd: 0.02")))
    await sign_in(web, "U_CAROL", "viewer")
    listed = await web.get(f"{D}/agents")
    assert f"default/{name}" in listed.text
    page = await web.get(f"{D}/agents/default/{name}")
    assert page.status_code == 200 and "v1" in page.text and "v2" in page.text
    assert re.search(r'class="del">-\s+per_task_usd: 0.01<', page.text), page.text
    assert re.search(r'class="add">\+\s+per_task_usd: 0.02<', page.text)
    assert (await web.get(f"{D}/agents/default/{name}", params={"to": "9"})).status_code == 400
    assert (await web.get(f"{D}/agents/default/nobody-{name}")).status_code == 404


async def test_a_finished_task_page_is_read_from_its_history_and_audit_without_asking_it(
    web: httpx.AsyncClient, client: Client, task_queue: str, pg_url: str
) -> None:
    """A finished task is not asked (answering would replay its whole history on a worker):
    its page comes from the history, and the tool call it refused, which leaves no event,
    from the audit row the real audit activity wrote."""
    script = Script([use("github.create_issue", ISSUE_ARGS, "c1")], default=lambda inp: say("Tuesdays."))
    activities = [record_audit if a.__name__ == "record_audit" else a for a in script.activities()]
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=activities,
        workflow_runner=workflow_runner(),
    )
    suffix = uuid.uuid4().hex[:8]
    async with worker:
        handle = await start_dashboard_task(
            client, HELPER_YAML, f"helper-{suffix}", f"eng-{suffix}", task_queue
        )
        assert (await handle.result()).status == TaskStatus.SUCCESS
        async with (await get_pool(pg_url)).connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT tool, outcome FROM audit_log WHERE task_id = %s AND kind = 'tool_refused'",
                    (handle.id,),
                )
            ).fetchone()
        assert row is not None and row["tool"] == "github.create_issue"
        await sign_in(web, "U_CAROL", "viewer")
        page = await web.get(f"{D}/tasks/{handle.id}")
    assert page.status_code == 200
    assert "(from its history)" in page.text and "Tuesdays." in page.text
    refused = f"<td>refused</td><td>github.create_issue: {escape(row['outcome'])}</td>"
    assert refused in page.text, page.text
