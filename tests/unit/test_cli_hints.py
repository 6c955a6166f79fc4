"""The small things a newcomer reads: command names in hints, unwrapped links, flag help,
surface-aware next actions, the one-line description a task starts with."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console
from typer.testing import CliRunner

from activities.store.agents import StoredAgent
from config.loader import parse_agent
from surfaces.cli import terminal
from surfaces.cli.main import app
from surfaces.task_lookup import qualified_reason
from surfaces.tasks import task_memo, task_summary
from tests.workflow.record_histories import HELPER_YAML
from workflows.outcomes import next_action
from workflows.types import SurfaceContext, TaskStatus


def test_hints_name_the_command_the_way_it_was_run() -> None:
    assert terminal.program(".venv/bin/openloop") == ".venv/bin/openloop"
    assert terminal.program("openloop") == "openloop"
    assert terminal.program("/usr/lib/python3/surfaces/cli/main.py") == "openloop"  # python -m
    text = "Approve: `openloop approve T1 --as U` (OpenLoop, openloop.ai/v1alpha1)"
    assert terminal.commands(text, ".venv/bin/openloop") == (
        "Approve: `.venv/bin/openloop approve T1 --as U` (OpenLoop, openloop.ai/v1alpha1)"
    )
    assert terminal.commands(text, "openloop") == text


def test_output_to_a_pipe_does_not_wrap_a_link() -> None:
    link = "http://localhost:8233/namespaces/default/workflows/task-cli-" + "x" * 80
    buffer = io.StringIO()
    console = terminal.make_console()
    Console(file=buffer, soft_wrap=console.soft_wrap, width=80).print(f"  Web UI: {link}")
    assert console.soft_wrap  # pytest's stdout is not a terminal
    assert f"  Web UI: {link}\n" == buffer.getvalue()


def test_help_shows_no_type_on_flags() -> None:
    for command in (["up", "--help"], ["ask", "--help"], ["approve", "--help"]):
        out = CliRunner().invoke(app, command, env={"COLUMNS": "120"}).output
        assert "<bool>" not in out, out
    assert "--no-follow" in CliRunner().invoke(app, ["ask", "--help"]).output


def test_next_action_speaks_of_a_thread_only_where_there_is_one() -> None:
    assert "thread" in next_action(TaskStatus.SUCCESS, "t1")  # what the workflow records
    assert "thread" in next_action(TaskStatus.SUCCESS, "t1", surface="slack")
    cli = next_action(TaskStatus.SUCCESS, "t1", surface="cli")
    assert "thread" not in cli and "openloop ask" in cli
    assert next_action(TaskStatus.BUDGET_EXHAUSTED, "t1", surface="cli") == next_action(
        TaskStatus.BUDGET_EXHAUSTED, "t1"
    )


def test_a_denied_action_does_not_read_as_a_plain_success() -> None:
    approvals = ["asked U_A to approve memory.save", "memory.save denied by U_A"]
    assert qualified_reason(TaskStatus.SUCCESS, "answered", approvals) == (
        "answered, but memory.save was denied by U_A"
    )
    assert qualified_reason(TaskStatus.SUCCESS, "answered", approvals[:1]) == "answered"
    assert qualified_reason(TaskStatus.CANCELLED, "cancelled by U", approvals) == "cancelled by U"


def test_a_task_starts_with_a_one_line_description() -> None:
    agent = StoredAgent(parse_agent(HELPER_YAML), 3, datetime.now(UTC), "sha")
    request = "Please remember:\n\nwe chose Postgres 16 " + "for the ledger " * 20
    summary = task_summary(agent, request)
    assert (
        "\n" not in summary and summary.startswith("helper: Please remember: we chose") and len(summary) < 140
    )
    memo = task_memo(agent, SurfaceContext(surface="cli", channel="cli", user="cli:local"), request)
    assert memo["description"] == summary and memo["agent"] == "helper v3"
    assert memo["outcome"] == "running"  # the task replaces it with how it ended
