"""The constants of a task: what every model call of it shares, stored once per run (a local
activity at the run's start) and read by the model activity, so none of it is repeated in
each call's history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workflows.task_basics import SurfaceContext
from workflows.tool_call_types import MemoryScopeRef

# The local activity that stores a run's TaskConstants (a permanent name, like ActivityName's).
SAVE_TASK_CONSTANTS = "openloop.model.save_task_constants"


@dataclass
class TaskConstants:
    """What every model call of a task shares. The workflow stores it once per run (a local
    activity at the run's start, `SAVE_TASK_CONSTANTS`) and the model activity reads it in the
    round trip it already makes, so none of it is repeated in each call's history. Per-call
    values (headroom, max_tokens, the cursor) stay in the input."""

    agent_name: str
    workspace: str
    channel: str
    surface: str
    models: list[str]  # the policy's route for the task's kind
    summary_models: list[str]  # the route for summaries
    tool_names: list[str]  # the tools a step offers the model
    on_exceeded: str = "block"
    monthly_usd: float | None = None
    channel_monthly_usd: float | None = None
    context_window: int | None = None
    context: SurfaceContext | None = None  # where folded tool calls act
    memory: MemoryScopeRef | None = None  # the memory scope folded tool calls read
    output_schema: dict[str, Any] | None = None  # the structured output a playbook step asks


@dataclass
class SaveTaskConstantsInput:
    """Store a task's constants (replacing a previous run's)."""

    task_id: str
    constants: TaskConstants
