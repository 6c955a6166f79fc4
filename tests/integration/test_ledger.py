"""The usage ledger and audit trail on real Postgres: idempotent writes inside the caller's
transaction, hashed and redacted arguments, spend vs. budget reports, and the same data
through `GET /usage`, `GET /audit` and `openloop usage`.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool
from temporalio.testing import ActivityEnvironment
from typer.testing import CliRunner

from activities.store.agents import apply_agent
from activities.store.db import get_pool
from activities.store.ledger import UsageRow, write_usage
from activities.store.ledger_reports import list_audit, usage_report
from activities.store.store_activities import record_audit
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.app import create_app
from surfaces.cli.main import app as cli_app
from workflows.types import AuditEvent

MARCH = datetime(2024, 3, 20, 12, tzinfo=UTC)


@pytest.fixture
async def pool(db_settings: Settings) -> AsyncConnectionPool:
    return await get_pool(db_settings.require_database_url())


async def agent_with_budget(
    pool: AsyncConnectionPool, monthly: float | None, per_channel: float | None
) -> str:
    name = f"spend-{uuid.uuid4().hex[:8]}"
    budget = {"monthly_usd": monthly, "per_channel_monthly_usd": per_channel}
    await apply_agent(
        pool,
        AgentConfig.model_validate(
            {
                "apiVersion": "openloop.ai/v1alpha1",
                "kind": "Agent",
                "metadata": {"name": name},
                "spec": {"budget": budget},
            }
        ),
    )
    return name


def usage(
    agent: str, task: str, step: int, channel: str, model: str, cost: float, at: datetime | None
) -> UsageRow:
    return UsageRow(
        task_id=task,
        step=step,
        agent=agent,
        workspace="default",
        channel=channel,
        surface="slack",
        model=model,
        prompt_tokens=100 * step,
        completion_tokens=10 * step,
        cost_usd=cost,
        created_at=at,
    )


def event(task: str, key: str, arguments: dict[str, object] | None, agent: str = "helper") -> AuditEvent:
    return AuditEvent(
        task_id=task,
        step=3,
        key=key,
        agent=agent,
        workspace="default",
        channel="C1",
        kind="tool_call",
        actor="U_ALICE",
        tool="github.create_issue",
        arguments=arguments,
        outcome="ok",
        approver="U_BOB",
    )


async def test_usage_writes_are_idempotent_and_join_the_callers_transaction(
    pool: AsyncConnectionPool,
) -> None:
    task = f"task-{uuid.uuid4().hex[:8]}"
    async with pool.connection() as conn:
        assert await write_usage(conn, usage("a", task, 1, "C1", "m", 0.01, None)) is True
        assert await write_usage(conn, usage("a", task, 1, "C1", "m", 0.01, None)) is False
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                assert await write_usage(conn, usage("a", task, 2, "C1", "m", 0.02, None))
                raise RuntimeError("the caller's transaction fails after the write")
        rows = await (
            await conn.execute("SELECT step, key, cost_usd FROM usage_ledger WHERE task_id = %s", (task,))
        ).fetchall()
    assert rows == [{"step": 1, "key": "model:1", "cost_usd": 0.01}]


async def test_audit_rows_keep_a_hash_and_a_redacted_preview(pool: AsyncConnectionPool) -> None:
    task = f"task-{uuid.uuid4().hex[:8]}"
    arguments: dict[str, object] = {
        "repo": "acme/api",
        "title": "Flaky test",
        "body": "x" * 5000,
        "api_key": "abc123",
        "Authorization": "Bearer very-secret-value",
        "nested": {"password": "hunter2", "note": "token is ghp_abcdefghijklmnopqrstuvwxyz"},
        "labels": [f"l{i}" for i in range(30)],
    }
    env = ActivityEnvironment()
    await env.run(record_audit, event(task, "3:call-1:tool", arguments))
    await env.run(record_audit, event(task, "3:call-1:tool", arguments))  # a retry
    rows = await list_audit(pool, task_id=task)
    assert len(rows) == 1
    row = rows[0]
    assert (row["actor"], row["approver"], row["tool"], row["outcome"]) == (
        "U_ALICE",
        "U_BOB",
        "github.create_issue",
        "ok",
    )
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    assert row["arguments_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    preview = row["arguments_preview"]
    assert preview["repo"] == "acme/api" and preview["title"] == "Flaky test"
    assert preview["api_key"] == preview["Authorization"] == "***"
    assert preview["nested"]["password"] == "***"
    assert "ghp_" not in json.dumps(preview) and "hunter2" not in json.dumps(preview)
    assert len(preview["body"]) < 200 and preview["body"].endswith("(5000 chars)")
    assert len(preview["labels"]) == 21 and preview["labels"][-1] == "…(+10 more)"


async def test_usage_report_against_monthly_budgets(pool: AsyncConnectionPool) -> None:
    a = await agent_with_budget(pool, monthly=10.0, per_channel=4.0)
    b = await agent_with_budget(pool, monthly=None, per_channel=None)
    async with pool.connection() as conn:
        for row in (
            usage(a, f"{a}-t1", 1, "C1", "m-small", 1.00, datetime(2024, 3, 2, 9, tzinfo=UTC)),
            usage(a, f"{a}-t2", 2, "C1", "m-big", 2.50, datetime(2024, 3, 19, 9, tzinfo=UTC)),
            usage(a, f"{a}-t3", 1, "C2", "m-small", 0.50, datetime(2024, 3, 10, 9, tzinfo=UTC)),
            usage(a, f"{a}-t0", 1, "C1", "m-big", 5.00, datetime(2024, 2, 25, 9, tzinfo=UTC)),
            usage(b, f"{b}-t1", 1, "C3", "m-small", 0.25, datetime(2024, 3, 15, 9, tzinfo=UTC)),
        ):
            await write_usage(conn, row)

    report = await usage_report(pool, agent=a, now=MARCH)
    assert report["total"]["cost_usd"] == 4.0 and report["total"]["calls"] == 3
    [by_agent] = report["by_agent"]
    assert (by_agent["month_usd"], by_agent["monthly_budget_usd"], by_agent["remaining_usd"]) == (
        4.0,
        10.0,
        6.0,
    )
    assert [(r["channel"], r["cost_usd"], r["monthly_budget_usd"]) for r in report["by_channel"]] == [
        ("C1", 3.5, 4.0),
        ("C2", 0.5, 4.0),
    ]
    assert [(r["model"], r["cost_usd"]) for r in report["by_model"]] == [
        ("m-big", 2.5),
        ("m-small", 1.5),
    ]
    assert report["by_task"][0]["task_id"] == f"{a}-t2"
    assert report["daily"] == [
        {"day": "2024-03-02", "cost_usd": 1.0},
        {"day": "2024-03-10", "cost_usd": 0.5},
        {"day": "2024-03-19", "cost_usd": 2.5},
    ]
    assert report["budget_usd"] == 10.0

    # A narrower window: the window's spend shrinks, the month-to-date against budget does not.
    recent = await usage_report(pool, agent=a, since=datetime(2024, 3, 15, tzinfo=UTC), now=MARCH)
    assert recent["total"]["cost_usd"] == 2.5
    assert recent["by_agent"][0]["month_usd"] == 4.0
    # A window reaching into last month counts it, but the budget is this month's.
    wide = await usage_report(pool, agent=a, since=datetime(2024, 2, 20, tzinfo=UTC), now=MARCH)
    assert wide["total"]["cost_usd"] == 9.0 and wide["by_agent"][0]["month_usd"] == 4.0
    one_channel = await usage_report(pool, agent=a, channel="C1", now=MARCH)
    assert one_channel["total"]["cost_usd"] == 3.5 and one_channel["budget_usd"] == 4.0
    no_budget = await usage_report(pool, agent=b, now=MARCH)
    assert no_budget["by_agent"][0]["monthly_budget_usd"] is None and no_budget["budget_usd"] is None


async def _spend_now(pool: AsyncConnectionPool) -> str:
    name = await agent_with_budget(pool, monthly=2.0, per_channel=None)
    at = datetime.now(UTC) - timedelta(seconds=1)
    async with pool.connection() as conn:
        await write_usage(conn, usage(name, f"{name}-t1", 1, "C9", "openai/gpt-4o", 0.75, at))
        await write_usage(conn, usage(name, f"{name}-t2", 1, "C9", "openai/gpt-4o", 0.5, at))
    await ActivityEnvironment().run(
        record_audit, event(f"{name}-t1", "1:c:tool", {"token": "xoxb-1"}, agent=name)
    )
    return name


async def test_http_usage_and_audit_are_read_only_json(
    pool: AsyncConnectionPool, db_settings: Settings
) -> None:
    name = await _spend_now(pool)
    transport = httpx.ASGITransport(app=create_app(db_settings, None))
    async with httpx.AsyncClient(transport=transport, base_url="http://openloop") as http:
        got = await http.get("/usage", params={"agent": name})
        assert got.status_code == 200
        body = got.json()
        assert body["total"]["cost_usd"] == 1.25 and body["budget_usd"] == 2.0
        assert body["by_agent"][0]["remaining_usd"] == 0.75
        audit = (await http.get("/audit", params={"agent": name})).json()
        assert audit["count"] == 1 and audit["items"][0]["arguments_preview"] == {"token": "***"}
        assert (await http.get("/usage", params={"since": "soon"})).status_code == 400
        assert (await http.post("/usage")).status_code == 405
        assert (await http.delete("/audit")).status_code == 405


@pytest.fixture
async def spender(pool: AsyncConnectionPool) -> str:
    return await _spend_now(pool)


def test_usage_command_prints_tables_and_a_burn_down(
    spender: str, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENLOOP_DATABASE_URL", pg_url)
    monkeypatch.setenv("COLUMNS", "160")
    runner = CliRunner()
    shown = runner.invoke(cli_app, ["usage", "--agent", spender])
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "By agent" in out and spender in out and "By model" in out and "openai/gpt-4o" in out
    assert "$1.25" in out and "$2.00" in out and "62%" in out  # 1.25 of a 2.00 budget
    assert "Budget burn-down" in out
    today = datetime.now(UTC)
    assert f"{today:%m-%d} " in out and "$0.7500 left" in out
    as_json = runner.invoke(cli_app, ["usage", "--agent", spender, "--json"])
    assert json.loads(as_json.output)["by_agent"][0]["month_usd"] == 1.25
    bad = runner.invoke(cli_app, ["usage", "--since", "whenever"])
    assert bad.exit_code == 1 and "--since" in bad.output
