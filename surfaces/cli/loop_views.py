"""How `openloop loops` shows a loop: the live line of the running command, the round
timeline, reports and the end. Rendering only; the commands are `surfaces.cli.loops`."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from workflows.egress_blocked import command_egress_lines
from workflows.loop_types import LoopStatus, LoopView, RoundReport, RoundVerdict

VERDICT_STYLE = {
    RoundVerdict.PASSED: "green",
    RoundVerdict.IMPROVING: "cyan",
    RoundVerdict.FAILED: "yellow",
    RoundVerdict.REGRESSING: "magenta",
    RoundVerdict.ABNORMAL: "red",
}
STATUS_STYLE = {LoopStatus.SUCCESS: "green", LoopStatus.RUNNING: "cyan"}


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return f"{count:.1f} GB"


def running_line(view: LoopView | None, beat: dict[str, Any] | None) -> Text:
    """`round 2 · verify · 3.1 s · 12.4 KB (2.1 KB/s) · ETA 4 s · pid 812   blocked: evil.example:443 ×3`."""
    if view is None:
        return Text("starting…", style="dim")
    parts = [f"round {view.round}"]
    if view.step is not None:
        parts.append(view.step.value)
    elif view.status is LoopStatus.RUNNING:
        parts.append("taking a workspace")
    if beat and "pid" in beat:
        parts.append(f"{beat.get('elapsed_s', 0):.1f} s")
        speed = beat.get("bytes_per_s") or 0
        parts.append(f"{_size(int(beat.get('output_bytes', 0)))} ({_size(int(speed))}/s)")
        if beat.get("eta_s") is not None:
            parts.append(f"ETA {beat['eta_s']:.0f} s")
        parts.append(f"pid {beat.get('pid')}")
    if view.worker:
        parts.append(f"on {view.worker}")
    text = Text(" · ".join(parts))
    blocked = beat.get("blocked") if beat else None
    if blocked and isinstance(blocked, list):  # refused by the network allowlist so far
        text.append(f"   blocked: {', '.join(str(b) for b in blocked)}", style="yellow")
    if view.verdicts:
        text.append("   ")
        for verdict in view.verdicts:
            text.append("●", style=VERDICT_STYLE[verdict])
    if not view.sandboxed:
        text.append("   UNSANDBOXED", style="bold red")
    if view.setup:  # how the workspace's setup went: ran, reused from the cache, or what it blocked
        text.append(f"   {view.setup}", style="dim")
    return text


def round_table(reports: list[RoundReport]) -> Table:
    table = Table(title="Rounds", show_lines=False, expand=False)
    for column in ("round", "verdict", "commands", "failing tests", "metric", "diff", "note"):
        table.add_column(column)
    for report in reports:
        commands = " ".join(
            f"{c.step.value}:{'✓' if c.outcome.value == 'passed' else c.outcome.value}"
            for c in report.commands
        )
        failing = "—" if report.failing_tests is None else str(len(report.failing_tests))
        diff = f"+{report.diff.insertions} −{report.diff.deletions}" if report.diff else ""
        table.add_row(
            str(report.round),
            Text(report.verdict.value, style=VERDICT_STYLE[report.verdict]),
            commands,
            failing,
            "" if report.metric is None else f"{report.metric:g}",
            diff,
            escape(report.note),
        )
    return table


def _short(command: str, limit: int = 100) -> str:
    """A command line on one line: a long {last_error} argument is cut."""
    flat = " ".join(command.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def report_lines(report: RoundReport) -> list[str]:
    """One round's report as a person reads it."""
    lines = [f"[bold]Round {report.round}[/bold]: {report.verdict.value} — {escape(report.note)}"]
    for command in report.commands:
        sandbox = "" if command.sandboxed else " [red](unsandboxed)[/red]"
        code = "—" if command.exit_code is None else str(command.exit_code)
        lines.append(
            f"  {command.step.value:<8} {command.outcome.value:<13} exit {code:<4}"
            f" {command.duration_s:7.2f} s  {escape(_short(command.command))}{sandbox}"
        )
        if command.reason:
            lines.append(f"           {escape(command.reason)}")
        # What the sandbox's network allowlist refused and let through, per command.
        lines += [
            f"           {escape(line)}" for line in command_egress_lines(command.command, command.egress)
        ]
    if report.failing_tests:
        lines.append(f"  failing: {escape(', '.join(report.failing_tests))}")
    if report.fixed_tests:
        lines.append(f"  fixed:   {escape(', '.join(report.fixed_tests))}")
    if report.broken_tests:
        lines.append(f"  [magenta]broke:   {escape(', '.join(report.broken_tests))}[/magenta]")
    if report.gone_tests:
        lines.append(f"  [magenta]gone:    {escape(', '.join(report.gone_tests))}[/magenta] (did not run)")
    if report.metric is not None:
        lines.append(f"  metric:  {report.metric:g}")
    if report.diff:
        d = report.diff
        lines.append(
            f"  diff:    {d.files_changed} file(s), +{d.insertions} −{d.deletions} ({d.sha256[:12]})"
        )
    return lines


def ending(status: str, reason: str, next_action: str) -> list[str]:
    style = STATUS_STYLE.get(LoopStatus(status), "red") if status in LoopStatus.__members__ else "red"
    lines = [f"[{style}]{status}[/{style}]: {escape(reason)}"]
    if next_action:
        lines.append(f"next: {escape(next_action)}")
    return lines
