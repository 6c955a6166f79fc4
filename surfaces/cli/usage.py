"""`openloop usage [--agent] [--channel] [--since]`: spend vs. budget per agent, channel, model
and task, and a burn-down of this month's budget in the terminal.

Budgets (`spec.budget.monthly_usd`, `per_channel_monthly_usd`) come from the stored agent
specs and are per calendar month (UTC). `--json` prints what `GET /usage` serves.
Exit codes: 0 ok, 1 a bad option, 2 no usable database.
"""

from __future__ import annotations

import calendar
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from activities.store.ledger_reports import parse_since, usage_report
from surfaces.cli.memory import fail, run_with_pool

EXIT_BAD_OPTION = 1
CHART_WIDTH = 40


def register(app: typer.Typer) -> None:
    app.command("usage")(usage)


def usage(
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    channel: Annotated[str | None, typer.Option(help="Only this channel (e.g. C0123ABCD).")] = None,
    since: Annotated[
        str | None, typer.Option(help="7d, 24h, or a date like 2025-05-01; default: this month.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON, as GET /usage serves.")] = False,
) -> None:
    """Spend vs. budget per agent, channel, model and task, with a burn-down chart."""
    try:
        since_at = parse_since(since)
    except ValueError as exc:
        raise fail(str(exc), EXIT_BAD_OPTION) from None
    report = run_with_pool(lambda pool: usage_report(pool, agent=agent, channel=channel, since=since_at))
    if as_json:
        print(json.dumps(report, indent=2))
        return
    render(report, Console(emoji=False, highlight=False))


def _usd(value: float | None) -> str:
    if value is None:
        return "—"
    sign, value = ("-" if value < 0 else ""), abs(value)
    return f"{sign}${value:,.4f}" if value < 1 else f"{sign}${value:,.2f}"


def _used(row: dict[str, Any]) -> Text:
    budget = row.get("monthly_budget_usd")
    if not budget:
        return Text("—")
    share = row["month_usd"] / budget
    style = "red" if share >= 1 else "yellow" if share >= 0.8 else "green"
    return Text(f"{share:.0%}", style=style)


def render(report: dict[str, Any], console: Console) -> None:
    since = report["since"][:16].replace("T", " ")
    total = report["total"]
    console.print(
        f"[bold]Spend since {since} UTC[/]: {_usd(total['cost_usd'])} over {total['calls']} "
        f"calls ({total['prompt_tokens']:,} in / {total['completion_tokens']:,} out tokens)"
    )
    if not total["calls"]:
        console.print("No model calls in this window.")
    agents = Table(
        "agent", "calls", "cost", "month to date", "monthly budget", "left", "used", title="By agent"
    )
    for row in report["by_agent"]:
        agents.add_row(
            escape(f"{row['workspace']}/{row['agent']}"),
            str(row["calls"]),
            _usd(row["cost_usd"]),
            _usd(row["month_usd"]),
            _usd(row["monthly_budget_usd"]),
            _usd(row["remaining_usd"]),
            _used(row),
        )
    channels = Table(
        "agent", "channel", "calls", "cost", "month to date", "channel budget", "used", title="By channel"
    )
    for row in report["by_channel"]:
        channels.add_row(
            escape(row["agent"]),
            escape(row["channel"] or "—"),
            str(row["calls"]),
            _usd(row["cost_usd"]),
            _usd(row["month_usd"]),
            _usd(row["monthly_budget_usd"]),
            _used(row),
        )
    models = Table("model", "calls", "tokens in", "tokens out", "cost", title="By model")
    for row in report["by_model"]:
        models.add_row(
            escape(row["model"]),
            str(row["calls"]),
            f"{row['prompt_tokens']:,}",
            f"{row['completion_tokens']:,}",
            _usd(row["cost_usd"]),
        )
    tasks = Table("task", "agent", "channel", "calls", "cost", title="Top tasks by cost")
    for row in report["by_task"]:
        tasks.add_row(
            escape(row["task_id"]),
            escape(row["agent"]),
            escape(row["channel"] or "—"),
            str(row["calls"]),
            _usd(row["cost_usd"]),
        )
    for table in (agents, channels, models, tasks):
        if table.row_count:
            console.print(table)
    now = datetime.fromisoformat(report["until"]).astimezone(UTC)
    daily = {date.fromisoformat(d["day"]): float(d["cost_usd"]) for d in report["daily"]}
    for line in burn_down(daily, report["budget_usd"], now.date()):
        console.print(line)


@dataclass(frozen=True)
class BurnDay:
    day: date
    spent: float  # that day
    left: float | None  # budget minus everything spent this month up to that day


def burn_down_days(daily: dict[date, float], budget: float | None, today: date) -> list[BurnDay]:
    days, spent_so_far = [], 0.0
    day = today.replace(day=1)
    while day <= today:
        spent_so_far += daily.get(day, 0.0)
        left = None if budget is None else budget - spent_so_far
        days.append(BurnDay(day, daily.get(day, 0.0), left))
        day += timedelta(days=1)
    return days


def burn_down(
    daily: dict[date, float], budget: float | None, today: date, width: int = CHART_WIDTH
) -> list[Text]:
    """One line per day this month: the budget left (bar) against an even burn (`│`), or,
    without a budget, the day's spend against the month's biggest day."""
    days = burn_down_days(daily, budget, today)
    month = today.strftime("%Y-%m")
    if budget is None or budget <= 0:
        peak = max((d.spent for d in days), default=0.0)
        lines = [Text(f"Daily spend, {month} (no monthly budget set)", style="bold")]
        for d in days:
            filled = 0 if peak <= 0 else round(d.spent / peak * width)
            lines.append(
                Text(f"{d.day:%m-%d} ")
                + Text("█" * filled, style="cyan")
                + Text(f"{' ' * (width - filled)} {_usd(d.spent)}")
            )
        return lines
    days_in_month = calendar.monthrange(today.year, today.month)[1]
    lines = [
        Text(
            f"Budget burn-down, {month}: {_usd(budget)} a month (bar: budget left; │: an even burn)",
            style="bold",
        )
    ]
    for d in days:
        assert d.left is not None
        filled = max(0, min(width, round(d.left / budget * width)))
        even = round((1 - d.day.day / days_in_month) * width)
        style = "red" if d.left < 0 else "yellow" if filled < even else "green"
        cells = ["█" if i < filled else "░" for i in range(width)]
        if 0 <= even < width:
            cells[even] = "│"
        note = f"over by {_usd(-d.left)}" if d.left < 0 else f"{_usd(d.left)} left"
        lines.append(
            Text(f"{d.day:%m-%d} ")
            + Text("".join(cells), style=style)
            + Text(f" {note}  (spent {_usd(d.spent)})")
        )
    return lines
