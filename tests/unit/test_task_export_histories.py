"""The export of every committed agent-task history (`tests/workflow/histories/`): each line
fits the JSON Schema, the records are numbered in time order from the request to the end,
re-serialise byte for byte, and each way a history records a run is told (approvals by
signal and by update, local, folded, workspace and MCP tool calls, children, steering, a
budget stop). Without a transcript, a model call's messages are null, not made up."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from surfaces import task_export_format as fmt
from surfaces.task_export_format import Header, TaskExport, dump_export, load_export
from surfaces.task_export_history import records_from_history
from surfaces.task_export_steps import in_time_order
from workers.history import load_history

HISTORIES = Path(__file__).parents[1] / "workflow" / "histories"
VALIDATOR = jsonschema.Draft202012Validator(
    json.loads(Path(fmt.__file__).with_name("task_export.schema.json").read_text())
)
# What each history must tell: record types, and how its tool calls ran.
TOLD = {
    "approval_approved.json": ({"approval_requested", "approval_decided", "signal"}, {"activity"}),
    "approval_by_update.json": ({"approval_requested", "approval_decided", "signal"}, {"activity"}),
    "approval_published.json": ({"approval_requested", "approval_decided", "signal"}, {"activity"}),
    "approval_expired.json": ({"approval_requested", "approval_decided"}, set()),
    "budget_exhausted.json": ({"model_call"}, set()),
    "catalog_mixed_step.json": ({"approval_decided"}, {"local", "activity"}),
    "coding_pull_request.json": ({"approval_decided"}, {"workspace"}),
    "delegation.json": ({"child"}, set()),
    "delegation_subagent.json": ({"approval_decided"}, {"local"}),
    "folded_tools.json": ({"tool_call"}, {"folded"}),
    "follow_up.json": ({"signal"}, set()),
    "mcp_tools.json": ({"approval_decided"}, {"activity"}),
    "plain_answer.json": ({"model_call"}, set()),
    "tool_call.json": ({"tool_call"}, {"folded"}),
}


def export_of(name: str) -> tuple[TaskExport, str]:
    history = load_history(HISTORIES / name)
    task, records = records_from_history(history.workflow_id, history.events, None)
    assert task is not None
    header = Header(
        task_id=history.workflow_id,
        agent=task.agent.name,
        agent_version=task.agent_version,
        exported_at="2026-01-01T00:00:00.000000Z",
        with_children=False,
    )
    done = TaskExport(header, in_time_order([records]))
    return done, dump_export(done)


def test_every_agent_task_history_is_covered() -> None:
    agent_tasks = {
        path.name
        for path in HISTORIES.glob("*.json")
        if not path.name.startswith(("loop_", "playbook_"))  # repair loops and playbook runs
    }
    assert agent_tasks == set(TOLD)


@pytest.mark.parametrize("name", sorted(TOLD))
def test_a_recorded_history_exports_valid_ordered_lines_that_round_trip(name: str) -> None:
    done, text = export_of(name)
    for line in text.splitlines():
        VALIDATOR.validate(json.loads(line))
    assert dump_export(load_export(text.splitlines())) == text
    records = done.records
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert [r.at for r in records] == sorted(r.at for r in records)
    assert records[0].type == "task" and records[-1].type == "end"
    types, ran = TOLD[name]
    assert types <= {r.type for r in records}
    assert {r.ran for r in records if isinstance(r, fmt.ToolCallRecord)} == ran
    calls = [r for r in records if isinstance(r, fmt.ModelCallRecord)]
    assert calls and all(call.messages is None for call in calls)
    steps = [r for r in records if isinstance(r, fmt.StepRecord)]
    assert [s.step for s in steps] == sorted({c.step for c in calls})
    end = records[-1]
    assert isinstance(end, fmt.EndRecord) and end.model_calls == len(calls)


def test_a_decision_by_update_and_its_approval_are_told_with_who_and_what() -> None:
    done, _ = export_of("approval_by_update.json")
    asked = next(r for r in done.records if isinstance(r, fmt.ApprovalRequestedRecord))
    decided = next(r for r in done.records if isinstance(r, fmt.ApprovalDecidedRecord))
    signal = next(r for r in done.records if isinstance(r, fmt.SignalRecord))
    tool = next(r for r in done.records if isinstance(r, fmt.ToolCallRecord))
    assert (decided.request_id, decided.outcome) == (asked.request_id, "approved")
    assert (signal.via, signal.counted, signal.by) == ("update", True, decided.decided_by)
    assert tool.tool == asked.tool and tool.arguments == asked.arguments
    assert tool.approved_by == decided.decided_by


def test_children_are_told_with_how_they_ended() -> None:
    done, _ = export_of("delegation.json")
    children = [r for r in done.records if isinstance(r, fmt.ChildRecord)]
    assert len(children) == 2
    for child in children:
        assert child.child_task_id.startswith(done.header.task_id) and child.role == "subagent"
        assert child.status == "SUCCESS" and child.cost_usd is not None
