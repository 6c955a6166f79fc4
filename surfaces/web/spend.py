"""The spend page: this month per agent and per channel against their budgets, the burn-down
(server-rendered SVG), spend by model and by day, and the most expensive tasks. It reads
`activities.store.ledger_reports.usage_report`, the same report as `openloop usage`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from activities.store.ledger_reports import usage_report
from surfaces.web import charts
from surfaces.web.auth import Person, person
from surfaces.web.common import pool, render

router = APIRouter()


def _share(row: dict[str, object], budget_key: str = "monthly_budget_usd") -> float | None:
    budget, spent = row.get(budget_key), row.get("month_usd")
    if not isinstance(budget, int | float) or not isinstance(spent, int | float) or budget <= 0:
        return None
    return float(spent) / float(budget)


@router.get("/spend", response_class=HTMLResponse)
async def spend(request: Request, who: Person = Depends(person)) -> HTMLResponse:
    agent = request.query_params.get("agent") or None
    channel = request.query_params.get("channel") or None
    now = datetime.now(UTC)
    report = await usage_report(await pool(request), agent=agent, channel=channel, now=now)
    start = datetime.fromisoformat(report["month_start"])
    for row in report["by_agent"] + report["by_channel"]:
        row["bar"] = Markup(charts.bar(_share(row)))
    chart = Markup(charts.burn_down(report["daily"], report["budget_usd"], start, now))
    return render(
        request,
        "spend.html",
        who,
        report=report,
        chart=chart,
        month=start.strftime("%B %Y"),
        agent=agent or "",
        channel=channel or "",
    )
