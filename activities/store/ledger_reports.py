"""The read side of the usage ledger and the audit trail: `openloop usage`, `GET /usage`
and `GET /audit`.

`usage_report` sums spend by agent, channel, model and task, with each agent's and channel's
month-to-date spend against its monthly budget; `list_audit` filters the audit trail. Rows
come back JSON-ready. Writing rows is `activities.store.ledger`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from activities.store.agents import list_agents
from config.fields import parse_duration

TOP_TASKS = 20


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """`7d`, `24h`, `2w` (that long ago), or an ISO date/time (UTC when no zone is given)."""
    if not text:
        return None
    now = now or datetime.now(UTC)
    try:
        return now - timedelta(seconds=parse_duration(text))
    except ValueError:
        pass
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"--since {text!r}: give a duration such as 7d or 24h, or a date such as 2025-05-01"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def month_start(now: datetime) -> datetime:
    """Budgets are monthly, by calendar month in UTC."""
    now = now.astimezone(UTC)
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _filters(agent: str | None, channel: str | None) -> tuple[str, dict[str, Any]]:
    clauses, params = ["created_at >= %(from)s", "created_at <= %(until)s"], {}
    if agent:
        clauses.append("agent = %(agent)s")
        params["agent"] = agent
    if channel:
        clauses.append("channel = %(channel)s")
        params["channel"] = channel
    return " AND ".join(clauses), params


async def usage_report(
    pool: AsyncConnectionPool,
    *,
    agent: str | None = None,
    channel: str | None = None,
    since: datetime | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Spend since `since` (default: this month) by agent, channel, model and task, with each
    agent's and channel's month-to-date spend against its monthly budget, and daily spend
    this month for a burn-down."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    start = month_start(now)
    since = (since or start).astimezone(UTC)
    where, params = _filters(agent, channel)
    params.update({"from": min(since, start), "until": now, "since": since, "month": start})
    sums = (
        "count(*) FILTER (WHERE created_at >= %(since)s) AS calls,"
        " COALESCE(sum(prompt_tokens) FILTER (WHERE created_at >= %(since)s), 0) AS prompt_tokens,"
        " COALESCE(sum(completion_tokens) FILTER (WHERE created_at >= %(since)s), 0)"
        " AS completion_tokens,"
        " COALESCE(sum(cost_usd) FILTER (WHERE created_at >= %(since)s), 0) AS cost_usd,"
        " COALESCE(sum(cost_usd) FILTER (WHERE created_at >= %(month)s), 0) AS month_usd"
    )
    groups = {
        "by_agent": "workspace, agent",
        "by_channel": "workspace, agent, channel",
        "by_model": "model",
        "by_task": "task_id, agent, channel, surface",
    }
    report: dict[str, Any] = {
        "since": since.isoformat(),
        "until": now.isoformat(),
        "month_start": start.isoformat(),
        "filters": {"agent": agent, "channel": channel},
    }
    async with pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(f"SELECT {sums} FROM usage_ledger WHERE {where}", params)
        report["total"] = _clean(await cur.fetchone() or {})
        for name, columns in groups.items():
            extra = ", max(created_at) AS last_at" if name == "by_task" else ""
            limit = f" LIMIT {TOP_TASKS}" if name == "by_task" else ""
            await cur.execute(
                f"SELECT {columns}, {sums}{extra} FROM usage_ledger WHERE {where}"
                f" GROUP BY {columns} HAVING count(*) FILTER (WHERE created_at >= %(since)s) > 0"
                f" ORDER BY cost_usd DESC, {columns}{limit}",
                params,
            )
            report[name] = [_clean(row) for row in await cur.fetchall()]
        await cur.execute(
            "SELECT (created_at AT TIME ZONE 'UTC')::date AS day, sum(cost_usd) AS cost_usd"
            f" FROM usage_ledger WHERE {where} AND created_at >= %(month)s GROUP BY 1 ORDER BY 1",
            params,
        )
        report["daily"] = [_clean(row) for row in await cur.fetchall()]
    await _attach_budgets(pool, report, agent, channel)
    return report


async def _attach_budgets(
    pool: AsyncConnectionPool, report: dict[str, Any], agent: str | None, channel: str | None
) -> None:
    budgets = {(a.workspace, a.name): a for a in await list_agents(pool)}
    for row in report["by_agent"]:
        stored = budgets.get((row["workspace"], row["agent"]))
        _budget(row, stored.config.spec.budget.monthly_usd if stored else None)
    for row in report["by_channel"]:
        stored = budgets.get((row["workspace"], row["agent"]))
        _budget(row, stored.config.spec.budget.per_channel_monthly_usd if stored else None)
    # The budget the burn-down is drawn against: the selection's monthly budget.
    selected = [s for s in budgets.values() if agent is None or s.name == agent]
    if channel:
        used = {(r["workspace"], r["agent"]) for r in report["by_channel"]}
        amounts = [
            s.config.spec.budget.per_channel_monthly_usd
            for s in selected
            if (s.workspace, s.name) in used or _serves_channel(s.config.spec, channel)
        ]
    else:
        amounts = [s.config.spec.budget.monthly_usd for s in selected]
    known = [a for a in amounts if a is not None]
    report["budget_usd"] = round(sum(known), 6) if known else None


def _serves_channel(spec: Any, channel: str) -> bool:
    slack = spec.surfaces.slack
    return slack is not None and channel in slack.channels


def _budget(row: dict[str, Any], monthly: float | None) -> None:
    row["monthly_budget_usd"] = monthly
    row["remaining_usd"] = None if monthly is None else round(monthly - row["month_usd"], 6)


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    """JSON-ready values: ISO timestamps and dates, floats rounded to micro-dollars."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, datetime | date):
            value = value.isoformat()
        elif isinstance(value, float):
            value = round(value, 6)
        out[key] = value
    return out


async def list_audit(
    pool: AsyncConnectionPool,
    *,
    task_id: str | None = None,
    agent: str | None = None,
    channel: str | None = None,
    kind: str | None = None,
    tool: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Audit rows, newest first, filtered by any of the given fields."""
    clauses: list[str] = []
    params: dict[str, Any] = {"limit": max(1, min(limit, 1000))}
    for column, value in (
        ("task_id", task_id),
        ("agent", agent),
        ("channel", channel),
        ("kind", kind),
        ("tool", tool),
    ):
        if value:
            clauses.append(f"{column} = %({column})s")
            params[column] = value
    if since is not None:
        clauses.append("created_at >= %(since)s")
        params["since"] = since
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    async with pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            "SELECT id, task_id, step, key, workspace, agent, channel, kind, actor, approver,"
            " tool, arguments_sha256, arguments_preview, outcome, created_at"
            f" FROM audit_log {where} ORDER BY created_at DESC, id DESC LIMIT %(limit)s",
            params,
        )
        return [_clean(row) for row in await cur.fetchall()]
