"""What a playbook run hands its activities: its record for the store, and an emitted event.

Pure data, permanent once released (activity names and input shapes), importable inside the
workflow sandbox.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from workflows.playbook_types import PlaybookRunStatus, StepRun

# Emitted events start runs that may emit again: a chain stops at this depth, so two
# playbooks that answer each other's events cannot loop for ever.
MAX_EMIT_DEPTH = 5
# However wide a chain fans out (two steps emitting, two playbooks listening), one outside
# event starts at most this many runs in all; the start that would pass it is refused.
MAX_RUNS_PER_EVENT = 10
# The run key a Schedule's action carries: the run takes the schedule's time instead.
SCHEDULED_RUN_KEY = "schedule"
CRON_EVENT = "cron"  # a scheduled run's event name; its fields are `scheduled_at` and `last_run`


class PlaybookActivity:
    """Stable activity names: renaming one is a migration for runs in flight."""

    RECORD = "openloop.playbook.record_run"
    PUBLISH = "openloop.playbook.publish_event"
    AGENT = "openloop.playbook.agent_start"


class AgentLookup(BaseModel):
    """A step's agent, by the applied name the compiler resolved (in whichever workspace)."""

    agent: str
    # The step's `approval`: with "agent", an agent whose writes are not all gated is refused.
    approval: str = "agent"


class RunRecord(BaseModel):
    """A run as the store keeps it: written when it starts, after each step, and at its end."""

    run_id: str
    playbook: str
    version: int
    event_name: str
    run_key: str
    event: dict[str, Any] = Field(default_factory=dict)
    status: PlaybookRunStatus = PlaybookRunStatus.RUNNING
    steps: list[StepRun] = Field(default_factory=list)
    cost_usd: float = 0.0
    reason: str = ""
    depth: int = 0
    seq: int = 0  # the run's n-th write: a store never lets an older one replace a newer one


class Recorded(BaseModel):
    """What the store knew when a run's first record was written."""

    last_run: str | None = None  # a cron run's: the key (scheduled time) of the run before it


class PublishEvent(BaseModel):
    """An event a step emitted: start the runs of the playbooks listening for it."""

    event_name: str
    event: dict[str, Any] = Field(default_factory=dict)
    run_key: str  # the emitting run and step: a retried publish starts nothing new
    depth: int  # the depth of the runs it starts
    source: str = ""  # the emitting run, for messages
    origin: str = ""  # the outside event that began the chain: its runs count together


class SensorPoll(BaseModel):
    """Call a `poll=` sensor once and start the runs for the event it makes."""

    ref: str  # `module:function` under the sensors folder
    emits: str
    folder: str  # the playbooks folder whose `sensors/` holds it, as the worker sees it
    run_key: str = ""  # set by the poll workflow: the sensor and the firing's time


class Published(BaseModel):
    started: list[str] = Field(default_factory=list)  # workflow ids of runs started now
    duplicates: list[str] = Field(default_factory=list)  # already started by an earlier attempt
    refused: str = ""  # why nothing, or not every run, was started (the depth or runs limit)
