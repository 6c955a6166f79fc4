"""Who may extend a paused task's budget: whoever may approve its requests.

The agent's approvers may be user groups and `@handles` (`spec.approvals.approvers`), so
before a task waits for an extension it has them resolved to user ids by the same activity
that resolves an approval request's approvers (`openloop.approval.prepare`, whose cost
estimate is not used here). An extension (the `openloop.task.decide` update, or the
`extend_budget` signal) then counts when its sender is one of those ids, by the approval rule
(`workflows.approval_rule.allowed_ids`). An extension sent
before the task ever waited is checked against the listed approvers only.

Workflow code: the membership is read by the activity and recorded in the history, so the
check stays deterministic.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import SURFACE_OPTIONS
    from workflows.approval_rule import allowed_ids
    from workflows.message_types import PrepareApprovalInput, PrepareApprovalResult
    from workflows.types import ActivityName, TaskInput


class BudgetExtenders:
    def __init__(self, inp: TaskInput) -> None:
        self.inp = inp
        self.approver_ids: list[str] | None = None  # None until resolved

    async def resolve(self, steps_so_far: int) -> None:
        """Before waiting for an extension: the approvers as the user ids they stand for now."""
        spec = self.inp.agent.spec
        prepared: PrepareApprovalResult = await workflow.execute_activity(
            ActivityName.PREPARE_APPROVAL,
            PrepareApprovalInput(
                self.inp.task_id,
                list(spec.approvals.approvers),
                spec.model_policy.default,
                steps_so_far,
                spec.limits.max_iterations,
                spec.model_policy.max_output_tokens,
            ),
            result_type=PrepareApprovalResult,
            **SURFACE_OPTIONS,
        )
        self.approver_ids = list(prepared.approver_ids)

    def may_extend(self, by: str) -> bool:
        return by in allowed_ids(list(self.inp.agent.spec.approvals.approvers), self.approver_ids)
