"""What a playbook is once compiled, and what one run of it takes and gives. Pure data shared by
the compiler (`config.playbooks`), the store, the run workflow and the CLI; the compiler is the
only producer of `CompiledPlaybook`, so the workflow trusts its shape (a DAG, references checked).
Released names and fields are permanent."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

PLAYBOOK_WORKFLOW_NAME = "openloop.PlaybookRun"
# The search attribute a run carries so the Web UI and `playbooks runs` filter by playbook.
PLAYBOOK_SEARCH_ATTRIBUTE = "OpenLoopPlaybook"


class FieldKind(StrEnum):
    STR = "str"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    ENUM = "enum"
    LIST_STR = "list[str]"


class TypedField(BaseModel):
    """One field of an event or a step's output: `verdict: enum[pass, fail]`, `notes: str`."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: FieldKind
    choices: tuple[str, ...] = ()  # only for ENUM
    optional: bool = False  # written `str?`


class EventType(BaseModel):
    """A registered event: its typed fields and where it comes from (`slack`, `github`,
    `webhook`, `sensor`, `playbook` for one emitted by a step, `cron`)."""

    model_config = ConfigDict(frozen=True)

    name: str
    fields: tuple[TypedField, ...] = ()
    source: str = ""
    # Source-specific selection, as written: {"event": "workflow_run", "conclusion": "failure"},
    # {"channel": "C1", "pattern": "deploy"}, {"hook": "sentry"}.
    match: dict[str, Any] = Field(default_factory=dict)


class TriggerKind(StrEnum):
    EVENT = "event"
    CRON = "cron"


class Trigger(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: TriggerKind
    event: str | None = None  # TriggerKind.EVENT
    cron: str | None = None  # TriggerKind.CRON: five fields
    timezone: str = "UTC"


class EmitCondition(BaseModel):
    """`verdict == fail` on a step's `emits:`: the event is published only when the step's
    output field has (or, `equals=False`, has not) that value."""

    model_config = ConfigDict(frozen=True)

    name: str  # an output field of the step
    value: str  # as written; a bool output compares as `true` / `false`
    equals: bool = True

    def holds(self, output: dict[str, Any]) -> bool:
        found = output.get(self.name)
        text = None if found is None else (str(found).lower() if isinstance(found, bool) else str(found))
        return (text == self.value) is self.equals

    def __str__(self) -> str:
        return f"{self.name} {'==' if self.equals else '!='} {self.value}"


class PlaybookStep(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str  # the file's stem: `ci-triage/investigate.md` → "investigate"
    agent: str  # resolved through the registry's aliases to an applied agent's name
    instructions: str  # the prose body, `{{ event.field }}` / `{{ step.field }}` not yet filled
    after: tuple[str, ...] = ()
    output: tuple[TypedField, ...] = ()
    emits: str | None = None
    emit_when: EmitCondition | None = None  # None: `emits` after every success
    # The emitted event's fields taken from the run's event, the output lacking them.
    carried: tuple[str, ...] = ()
    budget_usd: float | None = None
    # Writes this step's agent may make need an approval first ("required"), or follow the
    # agent's own rules ("agent").
    approval: str = "agent"
    source: str = ""  # the file, relative to the playbooks folder, for messages


class CompiledPlaybook(BaseModel):
    """A validated DAG: `steps` in a topological order, the entry step first."""

    model_config = ConfigDict(frozen=True)

    name: str  # the folder: `ci-triage`
    trigger: Trigger
    steps: tuple[PlaybookStep, ...]
    content_hash: str  # SHA-256 over the playbook's files and the registry entries it uses
    version: int = 0  # set when applied

    def step(self, name: str) -> PlaybookStep:
        return next(s for s in self.steps if s.name == name)


class PlaybookRunInput(BaseModel):
    playbook: CompiledPlaybook
    event_name: str  # the event's name, or "cron"
    event: dict[str, Any] = Field(default_factory=dict)
    # What makes this run unique: a delivery id, a Slack event id, a schedule's time. The
    # workflow id derives from it, so a redelivered event never starts a second run.
    run_key: str
    depth: int = 0  # emitted-event chains stop at a fixed depth
    # The outside event that began the chain (`event/key`), whose runs count together against
    # a cap; "" for a run started on its own (a schedule's, say): its own id stands in.
    origin: str = ""


class StepStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"  # an upstream step failed


class StepRun(BaseModel):
    name: str
    status: StepStatus = StepStatus.PENDING
    task_id: str | None = None
    output: dict[str, Any] = Field(default_factory=dict)
    answer: str = ""
    cost_usd: float = 0.0
    tokens: int = 0
    reason: str = ""  # why it failed or was skipped
    attempts: int = 0  # answers that did not validate count here


class PlaybookRunStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class PlaybookRunResult(BaseModel):
    playbook: str
    version: int
    status: PlaybookRunStatus
    steps: list[StepRun]
    cost_usd: float = 0.0
    reason: str = ""
