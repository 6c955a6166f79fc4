"""What the sandbox's network allowlist refused, where a person decides: each refused destination
names the command that tried it and how often; a coding task sums them over its commands
(bounded) and its approval card shows them in Slack, on GitHub and in the CLI; a running loop's
status line shows what was blocked so far; the task's story (`explain`, the dashboard) lists
them. Hosts and commands come from inside the sandbox or from a model: they never become
markup."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console
from temporalio.api.common.v1 import ActivityType, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import (
    ActivityTaskCompletedEventAttributes,
    ActivityTaskScheduledEventAttributes,
    HistoryEvent,
)
from temporalio.contrib.pydantic import pydantic_data_converter

from activities.github.approval_card import approval_body, resolved_body
from activities.slack import blocks
from surfaces.cli.approval_view import print_request
from surfaces.cli.loop_views import running_line
from surfaces.timeline import story_from_history
from workflows.code_types import CodeActivity, CodeSetup, CodeToolInput, CodeToolResult
from workflows.egress_blocked import (
    MAX_KEPT,
    SHOWN,
    BlockedTally,
    CommandEgress,
    blocked_line,
    live_blocked,
    short_command,
)
from workflows.egress_report import AllowedEgress, BlockedEgress, EgressReport
from workflows.loop_types import LoopStatus, LoopView, RepoSource, Step, WorkspaceHandle
from workflows.tool_call_types import MemoryScopeRef, ToolCallInput, ToolCallResult
from workflows.types import ApprovalRequest, ResolveApprovalRequestInput, SurfaceContext

EVIL = "blocked: evil.example:443 from `pytest` ×3 (not in the allowlist)"


def _report(*blocked: tuple[str, int, int], allowed: bool = False) -> EgressReport:
    return EgressReport(
        allowlist=["pypi.org"],
        blocked=[
            BlockedEgress(
                host=host, port=port, reason="not in the allowlist", count=count,
                first_at="2026-11-26T10:00:00+00:00", last_at="2026-11-26T10:00:05+00:00",
            )
            for host, port, count in blocked
        ],
        allowed=[AllowedEgress(host="pypi.org", port=443, bytes_in=1_200_000)] if allowed else [],
    )  # fmt: skip


def test_a_command_is_named_by_its_first_words() -> None:
    assert short_command("pytest -q tests/test_net.py") == "pytest"
    assert short_command("/usr/bin/python3 -m pytest -x") == "python3 -m pytest"
    assert short_command("python -c \"import urllib.request as u; u.urlopen('http://x')\"") == "python -c"
    assert short_command("PIP_INDEX_URL=http://x pip install -e . && pytest") == "pip install"
    assert short_command("npm --silent test") == "npm"  # an option first: the tool alone
    assert short_command("cargo test --offline; echo done") == "cargo test"
    assert short_command("curl 'unclosed") == "curl"
    assert short_command("a" * 100) == "a" * 39 + "…"


def test_a_task_sums_attempts_per_destination_and_command() -> None:
    tally = BlockedTally().add(CommandEgress(command="pytest", report=_report(("evil.example", 443, 2))), 3)
    tally = tally.add(CommandEgress(command="pytest", report=_report(("evil.example", 443, 1))), 5)
    tally = tally.add(CommandEgress(command="pip install", report=_report(("evil.example", 443, 1))), 6)
    same = tally.add(CommandEgress(command="pytest", report=_report(allowed=True)), 7)  # nothing refused

    assert same is tally
    first = tally.attempts[0]
    assert (first.host, first.port, first.command, first.count, first.step) == (
        "evil.example",
        443,
        "pytest",
        3,
        3,
    )
    assert tally.lines() == [EVIL, "blocked: evil.example:443 from `pip install` (not in the allowlist)"]


def test_the_tally_stays_bounded_and_counts_what_it_does_not_name() -> None:
    many = _report(*((f"h{n:02d}.example", 443, 1) for n in range(MAX_KEPT + 5)))
    tally = BlockedTally().add(
        CommandEgress(command="npm ci", report=many.model_copy(update={"dropped": 7})), 1
    )
    assert len(tally.attempts) == MAX_KEPT and tally.unnamed == 5 + 7
    lines = tally.lines()
    assert len(lines) == SHOWN + 1
    assert lines[-1] == f"… and {MAX_KEPT - SHOWN + 12} more blocked destinations"
    # Already known destinations are still counted once the tally is full.
    again = tally.add(CommandEgress(command="npm ci", report=_report(("h00.example", 443, 4))), 2)
    assert again.attempts[0].count == 5 and again.unnamed == tally.unnamed


def test_names_chosen_inside_the_sandbox_never_become_markup() -> None:
    line = blocked_line("<!channel>*x*`.example", 80, short_command("`rm` -rf"), 1, "not in the allowlist")
    assert line == "blocked: ??channel??x??.example:80 from `?rm?` (not in the allowlist)"


def test_a_running_loop_shows_what_was_blocked_so_far() -> None:
    report = _report(
        ("evil.example", 443, 3), ("a.example", 80, 1), ("b.example", 80, 1), ("c.example", 80, 1)
    )
    assert live_blocked(report) == ["evil.example:443 ×3", "a.example:80", "b.example:80", "1 more"]
    assert live_blocked(_report()) == [] and live_blocked(None) == []
    view = LoopView(
        loop_id="l", name="n", status=LoopStatus.RUNNING, round=2, step=Step.VERIFY, worker="w1", verdicts=[]
    )
    beat = {
        "pid": 81,
        "elapsed_s": 3.1,
        "output_bytes": 2048,
        "bytes_per_s": 100,
        "blocked": live_blocked(report),
    }
    shown = running_line(view, beat).plain
    assert shown.startswith("round 2 · verify · 3.1 s")
    assert shown.endswith("blocked: evil.example:443 ×3, a.example:80, b.example:80, 1 more")
    assert "blocked" not in running_line(view, {**beat, "blocked": []}).plain


# The approval card ---------------------------------------------------------------------------


def _request(**extra: object) -> ApprovalRequest:
    arguments: dict[str, object] = {
        "title": "Fix calc.mean",
        "body": "Divide by n.",
        "repo": "acme/api",
        "base": "main",
        "diff": "1 file(s) changed, +1 −1",
        "diff_sha256": "ab" * 32,
        "diff_preview": "diff --git a/calc.py b/calc.py\n",
        "full_diff": "openloop tasks diff task-code-1",
        "tests_before": "failed: 1 failing (t::test_mean)",
        "tests_after": "passed (3 passed)",
        "cost_so_far_usd": 0.01,
        **extra,
    }
    return ApprovalRequest(
        "apr-1", "a" * 32, "github.create_pull_request", arguments, ["cli:local"],
        "2026-11-26T10:00:00+00:00", "2026-11-29T10:00:00+00:00", "openai/gpt-4o-mini", 0.0004,
    )  # fmt: skip


def test_every_card_lists_what_was_blocked_and_a_clean_run_lists_nothing() -> None:
    tally = BlockedTally().add(CommandEgress(command="pytest", report=_report(("evil.example", 443, 3))), 3)
    request = _request(blocked=tally.lines())

    _, slack = blocks.approval_request_message("task-code-1", "coder", request)
    sections = [b["text"]["text"] for b in slack if b["type"] == "section" and "text" in b]
    assert f"*The sandbox's network allowlist refused*\n• {EVIL}" in sections
    _, plain = blocks.approval_request_message("task-code-1", "coder", _request())
    assert "network allowlist" not in str(plain) and len(plain) == len(slack) - 1

    body = approval_body("task-code-1", "coder", request)
    assert (
        f"- Tests after: passed (3 passed)\n- The sandbox's network allowlist refused:\n  - {EVIL}\n" in body
    )
    assert "allowlist" not in approval_body("task-code-1", "coder", _request())
    decided = ResolveApprovalRequestInput(
        "task-code-1",
        SurfaceContext("github", "acme/api", "alice", thread="1"),
        request,
        "issue:1",
        "approved",
        "alice",
        "2026-11-26T11:00:00+00:00",
    )
    assert f"  - {EVIL}\n" in resolved_body("task-code-1", decided)

    out = io.StringIO()
    print_request(Console(file=out, width=200), request)
    assert f"  tests: failed: 1 failing (t::test_mean) → passed (3 passed)\n  {EVIL}\n" in out.getvalue()


def test_a_card_shows_at_most_ten_lines_and_ignores_what_is_not_a_list_of_lines() -> None:
    many = [f"blocked: h{n}.example:443 from `pytest` (not in the allowlist)" for n in range(14)]
    out = io.StringIO()
    print_request(Console(file=out, width=200), _request(blocked=many))
    assert "h9.example" in out.getvalue() and "h10.example" not in out.getvalue()
    assert "… and 4 more lines" in out.getvalue()
    for odd in ("blocked: x", {"host": "x"}, [1, 2]):
        assert "blocked" not in approval_body("t", "coder", _request(blocked=odd)).split("Expires")[0]


# The task's story (`openloop explain`, the dashboard's task page) ------------------------------


def _payloads(value: object) -> Payloads:
    return Payloads(payloads=pydantic_data_converter.payload_converter.to_payloads([value]))


def _tool_events(first_id: int, step: int, command: str, egress: CommandEgress | None) -> list[HistoryEvent]:
    context = SurfaceContext(surface="cli", channel="c", user="cli:local")
    memory = MemoryScopeRef("default", "coder", "channel", "cli:c", "none", 30)
    call = ToolCallInput.for_call(
        "task-code-1", step, f"c{step}", "code.run", {"command": command}, context, memory
    )
    handle = WorkspaceHandle(
        loop_id="task-code-1", task_queue="q", worker="w1", path="/w", base_commit="0" * 40
    )
    asked = CodeToolInput(call=call, workspace=handle, setup=CodeSetup(repo=RepoSource(github="acme/api")))
    answered = CodeToolResult(result=ToolCallResult(ok=False, output="exit code 1"), egress=egress)
    at = datetime(2026, 11, 26, 10, step, tzinfo=UTC)
    scheduled = HistoryEvent(
        event_id=first_id,
        event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        activity_task_scheduled_event_attributes=ActivityTaskScheduledEventAttributes(
            activity_type=ActivityType(name=CodeActivity.RUN_TOOL), input=_payloads(asked)
        ),
    )
    completed = HistoryEvent(
        event_id=first_id + 1,
        event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        activity_task_completed_event_attributes=ActivityTaskCompletedEventAttributes(
            scheduled_event_id=first_id, result=_payloads(answered)
        ),
    )
    scheduled.event_time.FromDatetime(at)
    completed.event_time.FromDatetime(at)
    return [scheduled, completed]


def test_the_tasks_story_names_each_blocked_attempt_and_sums_them() -> None:
    refused = CommandEgress(command="pytest", report=_report(("evil.example", 443, 2)))
    events = [
        *_tool_events(5, 3, "pytest -q", refused),
        *_tool_events(9, 4, "ls", None),  # no allowlist: nothing to tell
        *_tool_events(
            13, 5, "pytest -q", refused.model_copy(update={"report": _report(("evil.example", 443, 1))})
        ),
    ]
    told = story_from_history(events)
    runs = [entry.what for entry in told.entries]
    assert runs[0] == (
        "code.run: failed: exit code 1; blocked: evil.example:443 from `pytest` ×2 (not in the allowlist)"
    )
    assert runs[1] == "code.run: failed: exit code 1"
    assert told.blocked == [EVIL]
    assert story_from_history(_tool_events(5, 3, "ls", None)).blocked == []
