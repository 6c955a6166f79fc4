"""Types of the per-agent admission workflow (`openloop.AgentAdmission`).

An agent's `limits.max_concurrent_tasks` and `limits.tasks_per_minute` are kept by one
long-lived workflow per agent: a task asks it for a slot before it starts work, waits in
line when there is none, and gives the slot back when it ends. Add fields with defaults only:
running admission workflows carry these shapes across continue-as-new. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ADMISSION_WORKFLOW_NAME = "openloop.AgentAdmission"
ADMITTED_SIGNAL = "admitted"  # sent to a waiting task when its turn comes
RATE_WINDOW_SECONDS = 60.0


def admission_workflow_id(workspace: str, agent: str) -> str:
    """One admission workflow per agent: every task of the agent queues at the same one."""
    return f"admission-{workspace}-{agent}"


@dataclass(frozen=True)
class AdmissionLimits:
    max_concurrent_tasks: int | None = None
    tasks_per_minute: int | None = None

    @property
    def any(self) -> bool:
        return self.max_concurrent_tasks is not None or self.tasks_per_minute is not None

    def describe(self) -> str:
        parts = []
        if self.max_concurrent_tasks is not None:
            parts.append(f"max_concurrent_tasks: {self.max_concurrent_tasks}")
        if self.tasks_per_minute is not None:
            parts.append(f"tasks_per_minute: {self.tasks_per_minute}")
        return ", ".join(parts)


@dataclass
class AdmissionCall:
    """What a task tells the admission activities: whose line, which task, which limits."""

    workspace: str
    agent: str
    task_id: str
    limits: AdmissionLimits


@dataclass
class EnterRequest:
    task_id: str
    limits: AdmissionLimits


@dataclass
class EnterResult:
    admitted: bool
    ahead: int = 0  # tasks before this one in line (0 when admitted)
    running: int = 0  # tasks of the agent holding a slot now


@dataclass
class LeaveRequest:
    task_id: str


@dataclass
class AdmissionState:
    running: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    admitted_at: list[str] = field(default_factory=list)  # ISO times within the rate window
    limits: AdmissionLimits = AdmissionLimits()
    runs: int = 0


@dataclass
class AdmissionInput:
    workspace: str
    agent: str
    max_updates_per_run: int = 1000
    state: AdmissionState | None = None


@dataclass
class AdmissionSnapshot:
    running: list[str]
    waiting: list[str]
    limits: AdmissionLimits
