"""The state of an agent task and the small helpers every part of the task uses.

Workflow code: deterministic, no I/O. `AgentTaskWorkflow` builds on this through
`TaskSteps`; splitting the class across modules changes nothing in its history.
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ApplicationError

# Workflow logic: imported inside the sandbox, so it is checked like this module.
from workflows.approvals import ApprovalGate

with workflow.unsafe.imports_passed_through():
    from workflows import search
    from workflows.activity_options import (
        SURFACE_OPTIONS,
    )
    from workflows.types import (
        ActivityName,
        BudgetUsage,
        CancelRequest,
        ChatMessage,
        FoldedToolCall,
        MemoryScopeRef,
        PostReplyInput,
        StepRecord,
        TaskInput,
        TaskStatus,
    )

MAX_STEP_RECORDS = 200


class TaskStop(Exception):
    """Ends the loop with a status; raised inside the workflow only."""

    def __init__(self, status: TaskStatus, reason: str):
        self.status = status
        self.reason = reason
        super().__init__(reason)


class TaskState:
    """Workflow state, set from the task input (and what a previous run carried over)."""

    def __init__(self, inp: TaskInput) -> None:
        self.inp = inp
        self.agent = inp.agent
        carried = inp.carried
        self.step = carried.step if carried else 0
        self.transcript_upto = carried.transcript_upto if carried else 0
        self.summary_upto = carried.summary_upto if carried else 0
        self.usage = carried.usage if carried else BudgetUsage()
        self.started_at_iso = carried.started_at_iso if carried else ""
        self.decisions: list[str] = list(carried.decisions) if carried else []
        self.pending: list[ChatMessage] = list(carried.pending_messages) if carried else []
        self.signatures: list[str] = list(carried.progress_signatures) if carried else []
        # Read-only local tool calls that run inside the next model call.
        self.folded: list[FoldedToolCall] = list(carried.folded_tools) if carried else []
        self.continuations = carried.continuations if carried else 0
        self.runs = carried.runs if carried else 1
        self.steps: list[StepRecord] = []
        self.task_status = TaskStatus.RUNNING
        self.last_action = "starting"
        self.reply = ""
        self.last_prompt_tokens = 0
        self.cancel_request: CancelRequest | None = None
        self.gate = ApprovalGate(inp, set(carried.used_request_ids) if carried else set())

    def _active_seconds(self) -> float:
        started = datetime.fromisoformat(self.started_at_iso)
        return (workflow.now() - started).total_seconds() - self.usage.waited_seconds

    def _check_cancelled(self) -> None:
        if self.cancel_request is not None:
            by = self.cancel_request.by
            raise TaskStop(
                TaskStatus.CANCELLED,
                f"cancelled by {by}"
                + (f": {self.cancel_request.reason}" if self.cancel_request.reason else ""),
            )

    async def _post(self, text: str, status: TaskStatus) -> None:
        await workflow.execute_activity(
            ActivityName.POST_REPLY,
            PostReplyInput(self.inp.task_id, self.inp.context, text, status, self.step),
            **SURFACE_OPTIONS,
        )

    def _memory_scope(self) -> MemoryScopeRef:
        memory = self.agent.spec.memory
        key = {
            "channel": f"{self.inp.context.surface}:{self.inp.context.channel}",
            "agent": self.agent.name,
            "workspace": self.agent.workspace,
        }[memory.scope.value]
        return MemoryScopeRef(
            workspace=self.agent.workspace,
            agent=self.agent.name,
            scope=memory.scope.value,
            scope_key=key,
            embedding=memory.embedding,
            retention_days=memory.retention_days,
        )

    def _cheapest_model(self) -> str:
        return self.agent.spec.model_policy.models_for(self.inp.task_kind)[0]

    def _set_status(self, status: TaskStatus) -> None:
        if status != self.task_status:
            self.task_status = status
            workflow.upsert_search_attributes([search.STATUS.value_set(status.value)])

    def _decide(self, text: str) -> None:
        self.decisions.append(text)

    def _record(
        self,
        kind: str,
        summary: str,
        cost: float = 0.0,
        actor: str | None = None,
        step: int | None = None,
    ) -> None:
        self.steps.append(
            StepRecord(
                self.step if step is None else step, kind, summary, workflow.now().isoformat(), cost, actor
            )
        )
        del self.steps[:-MAX_STEP_RECORDS]
        self.last_action = summary[:200]


def failure_reason(err: BaseException) -> str:
    """The innermost message of an activity failure, for the reason a person reads."""
    while err.__cause__ is not None:
        err = err.__cause__
    if isinstance(err, ApplicationError):
        return err.message
    return str(err) or type(err).__name__
