"""The delegation histories of the replay gate (recorded on the real stack by
`tests.workflow.record_delegation_histories`) hold what they are there for, and replay:
a parent that started two subagents in one answer and heard each wait for an approval, and
a subagent that signalled its parent on entering and leaving that wait. A change that
starts children differently fails the parent's replay."""

from __future__ import annotations

from pathlib import Path

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from workers.history import load_history, replay
from workflows.delegate_tool import CHILD_WAITING_SIGNAL
from workflows.types import WORKFLOW_NAME, BudgetUsage, TaskInput, TaskResult, TaskStatus

HISTORIES = Path(__file__).parent / "histories"
E = EventType


def events_of(name: str, kind: int) -> list[HistoryEvent]:
    return [e for e in load_history(HISTORIES / f"{name}.json").events if e.event_type == kind]


async def test_the_parents_history_has_its_parallel_children_and_their_waits() -> None:
    started = events_of("delegation", E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
    ids = [e.start_child_workflow_execution_initiated_event_attributes.workflow_id for e in started]
    assert len(ids) == 2 and all(child.startswith("task-record-delegation-d1-") for child in ids)
    completed = events_of("delegation", E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED)
    assert len(completed) == 2
    # Both children were started before either ended: they ran in parallel.
    first_end = min(e.event_id for e in completed)
    assert max(e.event_id for e in started) < first_end
    signals = events_of("delegation", E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    names = [e.workflow_execution_signaled_event_attributes.signal_name for e in signals]
    assert names == [CHILD_WAITING_SIGNAL] * 4  # each child entered and left its wait
    [report] = await replay([load_history(HISTORIES / "delegation.json")])
    assert report.ok, report.error


async def test_the_subagents_history_signals_its_parent_and_replays() -> None:
    sent = events_of("delegation_subagent", E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED)
    targets = {
        e.signal_external_workflow_execution_initiated_event_attributes.workflow_execution.workflow_id
        for e in sent
    }
    assert len(sent) == 2 and targets == {"task-record-delegation"}
    [report] = await replay([load_history(HISTORIES / "delegation_subagent.json")])
    assert report.ok, report.error


@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)  # a test double; no re-import
class AnswersWithoutDelegating:
    """A changed AgentTask that never starts a child."""

    @workflow.run
    async def run(self, inp: TaskInput) -> TaskResult:
        return TaskResult(inp.task_id, TaskStatus.SUCCESS, "answered", "", "", BudgetUsage(), 1)


async def test_a_workflow_that_no_longer_starts_the_children_fails_the_parents_replay() -> None:
    [report] = await replay(
        [load_history(HISTORIES / "delegation.json")], workflows=[AnswersWithoutDelegating]
    )
    assert not report.ok
