"""What a task did and why: its step counter, step records, decisions and visible status.

Workflow code: deterministic, no I/O. The status is mirrored to the `OpenLoopStatus` search
attribute so the Temporal Web UI can filter tasks by it. `TaskStop` ends the task's loop
with a status; `Cancellation` holds a cancel request until the loop checks it.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import search
    from workflows.outcomes import next_action
    from workflows.types import CancelRequest, Explanation, StepRecord, TaskStatus

MAX_STEP_RECORDS = 200


class TaskStop(Exception):
    """Ends the loop with a status; raised inside the workflow only."""

    def __init__(self, status: TaskStatus, reason: str, reply: str | None = None):
        self.status = status
        self.reason = reason
        self.reply = reply  # an answer written on the way out (a last summary), if any
        super().__init__(reason)


class Cancellation:
    """A cancel request, held until the task next checks it."""

    def __init__(self) -> None:
        self.request: CancelRequest | None = None

    @property
    def requested(self) -> bool:
        return self.request is not None

    def check(self) -> None:
        if self.request is not None:
            note = f": {self.request.reason}" if self.request.reason else ""
            raise TaskStop(TaskStatus.CANCELLED, f"cancelled by {self.request.by}{note}")


class TaskRecord:
    def __init__(self, step: int, decisions: list[str]) -> None:
        self.step = step  # the number of the latest model call
        self.decisions = decisions
        self.steps: list[StepRecord] = []
        self.status = TaskStatus.RUNNING
        self.last_action = "starting"
        self.last_model = ""  # the model that answered the latest call (after fallbacks)

    def set_status(self, status: TaskStatus) -> None:
        if status != self.status:
            self.status = status
            workflow.upsert_search_attributes([search.STATUS.value_set(status.value)])

    def decide(self, text: str) -> None:
        self.decisions.append(text)

    def record(
        self,
        kind: str,
        summary: str,
        cost: float = 0.0,
        actor: str | None = None,
        step: int | None = None,
    ) -> None:
        at = workflow.now().isoformat()
        self.steps.append(StepRecord(self.step if step is None else step, kind, summary, at, cost, actor))
        del self.steps[:-MAX_STEP_RECORDS]
        self.last_action = summary[:200]

    def explanation(self, task_id: str) -> Explanation:
        """Every decision and step, why the task stands where it does, and what to do next."""
        status = self.status
        return Explanation(
            task_id=task_id,
            status=status,
            reason=self.decisions[-1] if self.decisions else "",
            next_action=next_action(status, task_id) if status.finished else "",
            steps=list(self.steps),
            decisions=list(self.decisions),
        )


def failure_reason(err: BaseException) -> str:
    """The innermost message of an activity failure, for the reason a person reads."""
    while err.__cause__ is not None:
        err = err.__cause__
    if isinstance(err, ApplicationError):
        return err.message
    return str(err) or type(err).__name__
