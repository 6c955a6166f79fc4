"""Charts drawn on the server as SVG: readable without JavaScript, testable as text.

`burn_down` draws a month's cumulative spend day by day against the budget line and the
even pace that would end the month exactly on budget.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime
from html import escape
from typing import Any

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 32, 16, 28


def _days_in_month(start: datetime) -> int:
    return calendar.monthrange(start.year, start.month)[1]


def cumulative(daily: list[dict[str, Any]], start: datetime, today: date) -> list[tuple[int, float]]:
    """(day of month, spend up to and including that day) for every day so far."""
    by_day = {str(row["day"])[:10]: float(row["cost_usd"] or 0.0) for row in daily}
    total, points = 0.0, []
    for day in range(1, today.day + 1):
        total += by_day.get(start.date().replace(day=day).isoformat(), 0.0)
        points.append((day, total))
    return points


def burn_down(daily: list[dict[str, Any]], budget: float | None, start: datetime, now: datetime) -> str:
    """An SVG of spend so far this month (solid), the budget (dashed) and the even pace (dotted)."""
    days = _days_in_month(start)
    points = cumulative(daily, start, now.date())
    spent = points[-1][1] if points else 0.0
    top = max(spent, budget or 0.0, 0.01) * 1.1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(day: float) -> float:
        return LEFT + plot_w * (day - 1) / max(days - 1, 1)

    def y(usd: float) -> float:
        return TOP + plot_h * (1 - usd / top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" class="chart"'
        f' aria-label="Spend this month: ${spent:.2f}'
        + (f" of a ${budget:.2f} budget" if budget is not None else ", no monthly budget")
        + '">',
        f"<title>Spend this month: ${spent:.4f}</title>",
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        value = top * fraction
        parts.append(
            f'<text class="tick" x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">${value:.2f}</text>'
        )
    for day in sorted({1, days // 2, days}):
        parts.append(
            f'<text class="tick" x="{x(day):.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
            f"{start.strftime('%b')} {day}</text>"
        )
    if budget is not None:
        parts.append(
            f'<line class="budget" x1="{LEFT}" y1="{y(budget):.1f}"'
            f' x2="{LEFT + plot_w}" y2="{y(budget):.1f}"/>'
        )
        parts.append(
            f'<line class="pace" x1="{x(1):.1f}" y1="{y(0):.1f}" x2="{x(days):.1f}" y2="{y(budget):.1f}"/>'
        )
        parts.append(
            f'<text class="label" x="{LEFT + plot_w}" y="{y(budget) - 4:.1f}" text-anchor="end">'
            f"budget ${budget:.2f}</text>"
        )
    if points:
        line = " ".join(f"{x(day):.1f},{y(total):.1f}" for day, total in points)
        parts.append(f'<polyline class="spend" points="{line}"/>')
        last_day, last_total = points[-1]
        parts.append(f'<circle class="spend" cx="{x(last_day):.1f}" cy="{y(last_total):.1f}" r="3"/>')
    parts.append("</svg>")
    return "".join(parts)


def bar(fraction: float | None) -> str:
    """A small horizontal bar for a share of a budget (over 100% drawn full, marked over)."""
    if fraction is None:
        return ""
    width = max(0.0, min(fraction, 1.0)) * 100
    over = " over" if fraction > 1 else ""
    return (
        f'<svg class="bar{over}" viewBox="0 0 100 8" preserveAspectRatio="none" role="img"'
        f' aria-label="{escape(f"{fraction:.0%}")} of budget">'
        f'<rect class="track" width="100" height="8"/>'
        f'<rect class="fill" width="{width:.1f}" height="8"/></svg>'
    )
