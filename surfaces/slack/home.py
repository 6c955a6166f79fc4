"""What a person's App Home shows, read where it lives: their recent tasks from the Slack
inbox (the mentions they sent) with each task's status and cost from Temporal's search
attributes; approvals waiting for them from the running tasks' `status` queries, by the same
rule a click is checked with; each channel's spend this month from the usage ledger."""

from __future__ import annotations

import logging
from datetime import timedelta

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client
from temporalio.service import RPCError

from activities.slack.app_home import ChannelSpend, Home, HomeApproval, HomeTask
from activities.store.ledger_reports import usage_report
from surfaces.decisions import status_of
from surfaces.tasks import task_id_for
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.approval_rule import may_decide
from workflows.types import TaskStatus, TaskStatusView

log = logging.getLogger("openloop.slack")

RECENT_TASKS = 8
PENDING_LIMIT = 50  # running tasks waiting for approval looked at
QUERY_TIMEOUT = timedelta(seconds=2)


async def home_for(pool: AsyncConnectionPool, temporal: Client, user: str) -> Home:
    tasks = await recent_tasks(pool, temporal, user)
    return Home(
        user=user,
        tasks=tasks,
        approvals=await pending_for(temporal, user),
        spend=await channel_spend(pool, {t.channel for t in tasks}),
    )


async def recent_tasks(pool: AsyncConnectionPool, temporal: Client, user: str) -> list[HomeTask]:
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT event_id, payload->'event'->>'channel' AS channel, payload->'event'->>'text' AS text"
            " FROM slack_inbox WHERE payload->'event'->>'type' = 'app_mention'"
            " AND payload->'event'->>'user' = %s AND handled_at IS NOT NULL"
            " ORDER BY received_at DESC LIMIT %s",
            (user, RECENT_TASKS * 2),
        )
        rows = await cursor.fetchall()
    tasks: list[HomeTask] = []
    for row in rows:
        task_id = task_id_for("slack", row["event_id"])
        try:
            described = await temporal.get_workflow_handle(task_id).describe()
        except RPCError:
            continue  # no task came of it (no agent there, not allowed)
        attributes = described.typed_search_attributes
        tasks.append(
            HomeTask(
                task_id=task_id,
                agent=attributes.get(search.AGENT) or "agent",
                channel=str(row["channel"] or ""),
                status=status_of(described),
                request=_request_text(str(row["text"] or "")),
                cost_usd=float(attributes.get(search.COST_USD) or 0.0),
            )
        )
        if len(tasks) == RECENT_TASKS:
            break
    return tasks


async def pending_for(temporal: Client, user: str) -> list[HomeApproval]:
    query = f"{search.STATUS.name} = '{TaskStatus.WAITING_APPROVAL.value}' AND ExecutionStatus = 'Running'"
    found: list[HomeApproval] = []
    async for execution in temporal.list_workflows(query, limit=PENDING_LIMIT):
        handle = temporal.get_workflow_handle_for(AgentTaskWorkflow.run, execution.id)
        try:
            view: TaskStatusView = await handle.query(AgentTaskWorkflow.status, rpc_timeout=QUERY_TIMEOUT)
        except Exception as exc:  # no worker answers now: leave it out of this view
            log.warning("status of %s for App Home failed: %s", execution.id, type(exc).__name__)
            continue
        pending = view.pending_approval
        if pending is None or not may_decide(pending, user):
            continue
        attributes = execution.typed_search_attributes
        found.append(
            HomeApproval(
                task_id=execution.id,
                agent=view.agent,
                channel=attributes.get(search.CHANNEL) or "",
                tool=pending.tool,
                expires_at_iso=pending.expires_at_iso,
                estimated_cost_usd=pending.estimated_cost_usd,
            )
        )
    return sorted(found, key=lambda a: a.expires_at_iso)


async def channel_spend(pool: AsyncConnectionPool, channels: set[str]) -> list[ChannelSpend]:
    """Spend this month in the person's channels (all Slack channels when they have none yet)."""
    report = await usage_report(pool)
    rows = [
        r
        for r in report["by_channel"]
        if (r["channel"] in channels if channels else str(r["channel"])[:1] in ("C", "G"))
    ]
    return [
        ChannelSpend(str(r["channel"]), str(r["agent"]), float(r["month_usd"]), r["monthly_budget_usd"])
        for r in sorted(rows, key=lambda r: -float(r["month_usd"]))
    ]


def _request_text(text: str) -> str:
    """The mention without its leading `<@U…>`."""
    words = [w for w in text.split() if not (w.startswith("<@") and w.endswith(">"))]
    return " ".join(words) or "(no words: read the thread)"
