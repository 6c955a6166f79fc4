"""The export's `step` records, the tool calls a task refused (`surfaces.task_export_history`),
and the numbering of a tree's records.

A refused call (not allowed by policy, invalid arguments, a write outside the agent's
bindings) never runs, so it leaves no event in the history: the audit ledger has it (its
step, tool and why), and the model's answer has its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from activities.store.ledger import mask_text
from surfaces.task_export_calls import Asked, at_of
from surfaces.task_export_format import ModelCallRecord, Record, StepRecord, ToolCallRecord

REFUSED_SQL = (
    "SELECT step, tool, outcome, created_at FROM audit_log"
    " WHERE task_id = %s AND kind = 'tool_refused' ORDER BY created_at, id"
)


@dataclass(frozen=True)
class RefusedRow:
    """A `tool_refused` row of the audit ledger (`REFUSED_SQL`)."""

    step: int
    tool: str
    outcome: str
    created_at: datetime


def refused_calls(task_id: str, rows: Sequence[RefusedRow], asked: Sequence[Asked]) -> list[Record]:
    """A `tool_call` record (ran `refused`) per refused call, with the arguments the model
    gave: the first call of that step and tool not yet told."""
    left = list(asked)
    records: list[Record] = []
    for row in rows:
        call = next((a for a in left if a.step == row.step and a.tool == row.tool), None)
        if call is not None:
            left.remove(call)
        records.append(
            ToolCallRecord(
                task_id=task_id,
                at=at_of(row.created_at),
                step=row.step,
                call_id=call.call_id if call else None,
                tool=row.tool,
                arguments=call.arguments if call else None,
                ok=False,
                error_kind="refused",
                result=mask_text(row.outcome),
                result_ref=None,
                duration_ms=None,
                ran="refused",
                approved_by=None,
            )
        )
    return records


def with_steps(records: list[Record]) -> list[Record]:
    """A `step` record before the first record of each step, with the step's totals."""
    told: list[Record] = []
    seen: set[int] = set()
    for record in records:
        step = getattr(record, "step", None)
        if isinstance(record, ModelCallRecord | ToolCallRecord) and step is not None and step not in seen:
            seen.add(step)
            calls = [r for r in records if isinstance(r, ModelCallRecord) and r.step == step]
            told.append(
                StepRecord(
                    task_id=record.task_id,
                    at=record.at,
                    step=step,
                    model_calls=len(calls),
                    tool_calls=sum(1 for r in records if isinstance(r, ToolCallRecord) and r.step == step),
                    tokens_in=sum(c.tokens_in for c in calls),
                    tokens_out=sum(c.tokens_out for c in calls),
                    cost_usd=sum(c.cost_usd for c in calls),
                )
            )
        told.append(record)
    return told


def in_time_order(tasks: Sequence[Sequence[Record]]) -> list[Record]:
    """The records of a task and its children (each list in its own order), merged in time
    order and numbered; within a moment, each task's own order, the parent's first."""
    merged = sorted(
        ((record, tree, index) for tree, task in enumerate(tasks) for index, record in enumerate(task)),
        key=lambda item: (item[0].at, item[1], item[2]),
    )
    return [record.model_copy(update={"seq": seq}) for seq, (record, _, _) in enumerate(merged, 1)]
