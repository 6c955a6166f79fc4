"""How an eval run reads in a terminal (rich tables) and as JSON, and what changed between
two runs of the same cases (`--compare`): per case and per check, pass->fail in red."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from surfaces.evals.results import CaseRun, EvalRun

__all__ = ["Change", "changes", "print_comparison", "print_run", "run_json"]


def _rate(passed: int, run: int) -> str:
    return f"{passed}/{run} ({100 * passed / run:.0f}%)" if run else "-"


def print_run(console: Console, run: EvalRun) -> None:
    table = Table(title=f"{run.label}: {run.dataset}", title_justify="left")
    for column in ("case", "result", "status", "steps", "tokens", "cost", "latency", "task"):
        table.add_column(
            column, justify="right" if column in ("steps", "tokens", "cost", "latency") else "left"
        )
    for r in run.results:
        name = r.case_id if r.repeat == 1 else f"{r.case_id} #{r.repeat}"
        verdict = "[green]pass[/]" if r.passed else "[red]FAIL[/]"
        cost = f"${r.cost_usd:.4f}"
        table.add_row(
            escape(name),
            verdict,
            r.status,
            str(r.steps),
            str(r.tokens),
            cost,
            f"{r.latency_ms} ms",
            r.task_id,
        )
    console.print(table)
    checks = Table(title="Checks", title_justify="left")
    checks.add_column("check")
    checks.add_column("pass rate", justify="right")
    for kind, (passed, total) in sorted(run.check_rates().items()):
        colour = "green" if passed == total else "red"
        checks.add_row(kind, f"[{colour}]{_rate(passed, total)}[/]")
    console.print(checks)
    for r in run.results:
        if not r.passed:
            _print_failure(console, r)
    ran = [r for r in run.results if r.task_id] or run.results
    latencies = sorted(r.latency_ms for r in ran)
    median = latencies[len(latencies) // 2] if latencies else 0
    console.print(
        f"[bold]{run.label}[/]: {_rate(run.passed, len(run.results))} passed, "
        f"cost ${run.cost_usd:.4f}, {sum(r.tokens for r in ran)} tokens, "
        f"{sum(r.steps for r in ran) / max(1, len(ran)):.1f} steps a case, median latency {median} ms, "
        f"run id {run.id}"
    )


def _print_failure(console: Console, r: CaseRun) -> None:
    console.print(f"[red]FAIL[/] [bold]{escape(r.case_id)}[/] #{r.repeat} ({r.status})")
    for check in r.failed_checks:
        console.print(f"  {escape(check.name)}: {escape(check.detail)}")
    if r.task_id:
        console.print(f"  see why: openloop explain {r.task_id}")


@dataclass(frozen=True)
class Change:
    case_id: str
    check: str  # "" for the case as a whole
    before: bool | None  # None: not in that run
    after: bool | None

    @property
    def regressed(self) -> bool:
        return self.before is True and self.after is False


def _by_case(run: EvalRun) -> dict[str, list[CaseRun]]:
    found: dict[str, list[CaseRun]] = {}
    for r in run.results:
        found.setdefault(r.case_id, []).append(r)
    return found


def _all_pass(runs: list[CaseRun], check: str | None = None) -> bool | None:
    if check is None:
        return all(r.passed for r in runs) if runs else None
    seen = [c.passed for r in runs for c in r.checks if c.name == check]
    return all(seen) if seen else None


def changes(before: EvalRun, after: EvalRun) -> list[Change]:
    """Every case and check whose verdict differs (over all repeats: pass = every repeat passed)."""
    found: list[Change] = []
    old, new = _by_case(before), _by_case(after)
    for case_id in [*old, *(c for c in new if c not in old)]:
        a, b = old.get(case_id, []), new.get(case_id, [])
        if _all_pass(a) != _all_pass(b):
            found.append(Change(case_id, "", _all_pass(a), _all_pass(b)))
        names = dict.fromkeys(c.name for r in [*a, *b] for c in r.checks)
        for name in names:
            if _all_pass(a, name) != _all_pass(b, name):
                found.append(Change(case_id, name, _all_pass(a, name), _all_pass(b, name)))
    return found


def _word(value: bool | None) -> str:
    return {True: "[green]pass[/]", False: "[red]fail[/]", None: "[dim]-[/]"}[value]


def print_comparison(console: Console, before: EvalRun, after: EvalRun) -> None:
    found = changes(before, after)
    table = Table(title=f"{before.label} -> {after.label}", title_justify="left")
    for column in ("case", "check", before.label, after.label):
        table.add_column(escape(column))
    for change in found:
        style = "bold red" if change.regressed else ""
        table.add_row(
            escape(change.case_id),
            escape(change.check or "(case)"),
            _word(change.before),
            _word(change.after),
            style=style,
        )
    if found:
        console.print(table)
    else:
        console.print("No case or check changed.")
    regressed = sorted({c.case_id for c in found if c.regressed and not c.check})
    console.print(
        f"{before.label}: {_rate(before.passed, len(before.results))}   "
        f"{after.label}: {_rate(after.passed, len(after.results))}   "
        f"cost ${before.cost_usd:.4f} -> ${after.cost_usd:.4f}"
    )
    if regressed:
        console.print(f"[bold red]Regressed[/] ({len(regressed)}): {', '.join(regressed)}")


def run_json(run: EvalRun) -> dict[str, Any]:
    return {
        "id": run.id,
        "label": run.label,
        "agent": run.agent,
        "version": run.version,
        "model": run.model,
        "dataset": run.dataset,
        "pass_rate": run.pass_rate,
        "passed": run.passed,
        "cases": len(run.results),
        "cost_usd": run.cost_usd,
        "checks": {k: {"passed": p, "run": n} for k, (p, n) in run.check_rates().items()},
        "results": [
            {
                "case": r.case_id,
                "repeat": r.repeat,
                "task_id": r.task_id,
                "status": r.status,
                "passed": r.passed,
                "steps": r.steps,
                "tokens": r.tokens,
                "cost_usd": r.cost_usd,
                "latency_ms": r.latency_ms,
                "reply": r.reply,
                "failed": [{"check": c.name, "detail": c.detail} for c in r.failed_checks],
            }
            for r in run.results
        ],
    }
