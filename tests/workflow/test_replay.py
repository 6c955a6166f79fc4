"""The replay gate: every committed history replays with the current workflow code.

A failure here means a change to AgentTaskWorkflow would break tasks already in flight:
put the change behind a patch of the ledger (`workflows.patch_ledger`, see the README)
instead of re-recording the histories.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from typer.testing import CliRunner

from surfaces.cli.main import app
from workers.history import describe_event, load_history, replay
from workflows.types import (
    WORKFLOW_NAME,
    ActivityName,
    BudgetGrant,
    BudgetUsage,
    ModelCallInput,
    ModelCallResult,
    PostReplyInput,
    TaskInput,
    TaskResult,
    TaskStatus,
    TranscriptCursor,
)

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))
TASK_HISTORIES = [path for path in HISTORIES if not path.stem.startswith(("loop_", "playbook_"))]
SHORT = timedelta(seconds=30)


def first_call(inp: TaskInput) -> ModelCallInput:
    return ModelCallInput(
        task_id=inp.task_id, step=1, cursor=TranscriptCursor(0), budget=BudgetGrant(100, 1.0, 1000)
    )


@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)  # a test double; no re-import
class AsksTheModelFirst:
    """A changed AgentTask: it asks the model before telling the surface the task started."""

    @workflow.run
    async def run(self, inp: TaskInput) -> TaskResult:
        await workflow.execute_activity(
            ActivityName.CALL_MODEL,
            first_call(inp),
            result_type=ModelCallResult,
            start_to_close_timeout=SHORT,
        )
        return TaskResult(inp.task_id, TaskStatus.SUCCESS, "answered", "", "", BudgetUsage(), 1)


@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)  # a test double; no re-import
class SkipsMemory:
    """A changed AgentTask: it starts like the real one but no longer recalls memory."""

    @workflow.run
    async def run(self, inp: TaskInput) -> TaskResult:
        await workflow.execute_local_activity(
            ActivityName.TASK_STARTED,
            PostReplyInput(inp.task_id, inp.context, "", TaskStatus.RUNNING, 0),
            start_to_close_timeout=SHORT,
        )
        await workflow.execute_activity(
            ActivityName.CALL_MODEL,
            first_call(inp),
            result_type=ModelCallResult,
            start_to_close_timeout=SHORT,
        )
        return TaskResult(inp.task_id, TaskStatus.SUCCESS, "answered", "", "", BudgetUsage(), 1)


def first_command(history: WorkflowHistory) -> HistoryEvent:
    return next(
        e
        for e in history.events
        if e.event_type
        in (EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, EventType.EVENT_TYPE_MARKER_RECORDED)
    )


def test_the_representative_histories_are_committed() -> None:
    names = {path.stem for path in HISTORIES}
    assert {"plain_answer", "tool_call", "approval_approved", "approval_expired", "budget_exhausted"} <= names
    assert {"loop_repaired", "loop_stalled"} <= names
    assert {"coding_pull_request", "loop_agent_fixer"} <= names
    assert "playbook_run" in names


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays_with_the_current_code(path: Path) -> None:
    [report] = await replay([load_history(path)])
    assert report.ok, f"{path.name}: {report.error} (diverged at {report.diverged_at})"


async def test_a_reordered_workflow_is_reported_as_nondeterministic_at_the_diverging_event() -> None:
    history = load_history(HISTORIES[0])
    [report] = await replay([history], workflows=[AsksTheModelFirst])
    assert not report.ok
    assert report.error_type == "NondeterminismError"
    assert "Nondeterminism" in (report.error or "")
    # The first thing the recorded run did is where the new code went another way.
    assert report.diverged_at == describe_event(first_command(history))


async def test_a_workflow_that_skips_an_activity_fails_every_history_where_it_ran() -> None:
    reports = await replay([load_history(path) for path in TASK_HISTORIES], workflows=[SkipsMemory])
    assert len(reports) == len(TASK_HISTORIES)
    for report in reports:
        assert report.error_type == "NondeterminismError", report
        assert report.diverged_at is not None
        assert "MarkerRecorded (openloop.memory.recall)" in report.diverged_at


def test_cli_replays_a_history_file_without_a_server(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", "--history", str(HISTORIES[0])])
    assert result.exit_code == 0, result.output
    assert "OK" in result.output and "1 replayed, 0 failed" in result.output


def test_cli_rejects_a_file_that_is_not_a_history(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-history.json"
    bogus.write_text('{"hello": "world"}')
    result = CliRunner().invoke(app, ["replay", "--history", str(bogus)])
    assert result.exit_code == 1
    assert "no `events`" in result.output
