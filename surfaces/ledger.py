"""Read-only JSON views of the ledger: `GET /usage` (spend vs. budget by agent, channel, model
and task, with daily spend this month) and `GET /audit` (tool calls, approvals and operator
actions, newest first). The same data as `openloop usage`; nothing here writes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import FastAPI, HTTPException, Query
from psycopg_pool import AsyncConnectionPool

from activities.store.db import get_pool
from activities.store.ledger_reports import list_audit, parse_since, usage_report

MAX_AUDIT_ROWS = 1000


def register(app: FastAPI) -> None:
    async def pool() -> AsyncConnectionPool:
        url = app.state.settings.database_url
        if not url:
            raise HTTPException(503, "no database configured (set OPENLOOP_DATABASE_URL)")
        return await get_pool(url)

    def since_param(text: str | None) -> datetime | None:
        try:
            return parse_since(text)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None

    @app.get("/usage")
    async def usage(
        agent: str | None = None,
        channel: str | None = None,
        since: str | None = Query(None, description="7d, 24h, or a date; default: this month"),
    ) -> dict[str, Any]:
        """Spend since `since` by agent, channel, model and task, against monthly budgets."""
        return await usage_report(await pool(), agent=agent, channel=channel, since=since_param(since))

    @app.get("/audit")
    async def audit(
        task_id: str | None = None,
        agent: str | None = None,
        channel: str | None = None,
        kind: str | None = None,
        tool: str | None = None,
        since: str | None = Query(None, description="7d, 24h, or a date"),
        limit: int = Query(100, ge=1, le=MAX_AUDIT_ROWS),
    ) -> dict[str, Any]:
        """Audit rows (who asked, who approved, tool, arguments hash and redacted preview)."""
        items = await list_audit(
            await pool(),
            task_id=task_id,
            agent=agent,
            channel=channel,
            kind=kind,
            tool=tool,
            since=since_param(since),
            limit=limit,
        )
        return {"count": len(items), "items": items}
