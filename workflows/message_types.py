"""Signals and queries of a task, the surface activities' inputs (replies, approval
requests) and the audit event: what people and surfaces exchange with a running task."""

from __future__ import annotations

from dataclasses import dataclass, field

from workflows.task_basics import BudgetUsage, SurfaceContext, TaskStatus


@dataclass
class AuditEvent:
    task_id: str
    step: int
    key: str  # idempotency: one row per (task_id, key)
    agent: str
    workspace: str
    channel: str
    kind: str  # tool_refused | approval_requested | approval_granted | approval_denied | ...
    actor: str
    tool: str | None = None
    arguments: dict[str, object] | None = None
    outcome: str = ""
    approver: str | None = None


@dataclass
class PostReplyInput:
    task_id: str
    context: SurfaceContext
    text: str
    status: TaskStatus
    step: int
    streamed: list[str] = field(default_factory=list)  # Slack messages the answer was streamed into


@dataclass
class ApprovalRequest:
    """Shown to approvers and held in workflow state while the task waits."""

    request_id: str
    action_id: str
    tool: str
    arguments: dict[str, object]
    approvers: list[str]
    requested_at_iso: str
    expires_at_iso: str
    model: str
    estimated_cost_usd: float
    # The user ids allowed to decide, resolved when the request was made (user groups and
    # @handles expanded); None in requests made before resolution existed.
    approver_ids: list[str] | None = None
    estimate_note: str = ""  # how the cost was estimated, or why it could not be


@dataclass
class PrepareApprovalInput:
    """What the approval's preparing activity needs: who is listed, and what the task spent."""

    task_id: str
    approvers: list[str]
    model: str  # the model that answered the step asking for this action
    steps_so_far: int
    max_iterations: int
    max_output_tokens: int


@dataclass
class PrepareApprovalResult:
    approver_ids: list[str]
    estimated_cost_usd: float
    estimate_note: str = ""


@dataclass
class PostApprovalRequestInput:
    task_id: str
    context: SurfaceContext
    request: ApprovalRequest
    agent_name: str


@dataclass
class PostApprovalRequestResult:
    message_ref: str | None = None  # e.g. Slack channel:ts, to update when decided


@dataclass
class ResolveApprovalRequestInput:
    task_id: str
    context: SurfaceContext
    request: ApprovalRequest
    message_ref: str | None
    outcome: str  # approved | denied | expired | cancelled
    decided_by: str | None
    decided_at_iso: str


# Signals and queries -------------------------------------------------------------------


@dataclass(frozen=True)
class ApprovalDecision:
    request_id: str
    action_id: str
    approver: str
    note: str = ""


@dataclass(frozen=True)
class UserMessage:
    user: str
    text: str


@dataclass(frozen=True)
class CancelRequest:
    by: str
    reason: str = ""


@dataclass(frozen=True)
class BudgetExtension:
    by: str
    usd: float = 0.0
    tokens: int = 0
    iterations: int = 0


# A person's decision on a task, and what the task made of it. Every surface sends one
# through the `openloop.task.decide` update (`workflows.decisions`); the approve, deny and
# extend_budget signals carry the same payloads and stay accepted.
DECIDE_UPDATE = "openloop.task.decide"  # the update's name: permanent once released
DECISION_REFUSED = "DecisionRefused"  # the error type of a decision the update's validator refuses


@dataclass(frozen=True)
class Decision:
    """Exactly one of: approve or deny the pending request, or extend the budget."""

    approve: ApprovalDecision | None = None
    deny: ApprovalDecision | None = None
    extend: BudgetExtension | None = None

    @property
    def by(self) -> str:
        """Who decided."""
        if self.extend is not None:
            return self.extend.by
        answer = self.approve or self.deny
        return answer.approver if answer is not None else ""


@dataclass
class DecisionVerdict:
    """Whether a `Decision` counted; if not, why (the reason the audit records) and who may."""

    counted: bool
    reason: str = ""
    # The rule's case (`workflows.approval_rule`: closed | mismatch | expired | not_approver),
    # `invalid` for a malformed decision; a caller adds its own (`surfaces.decisions`).
    problem: str = ""
    approvers: list[str] = field(default_factory=list)  # as the agent lists them (groups too)
    # A refusal's audit row: a refused decision never reaches the history, so the caller
    # records it (`surfaces.decisions.decide`).
    audit: AuditEvent | None = None


@dataclass
class StepRecord:
    step: int
    kind: str  # model | tool | approval | refused | stop | message
    summary: str
    at_iso: str
    cost_usd: float = 0.0
    actor: str | None = None


@dataclass
class TaskStatusView:
    task_id: str
    agent: str
    status: TaskStatus
    step: int
    last_action: str
    usage: BudgetUsage
    limits: dict[str, float]
    pending_approval: ApprovalRequest | None
    reply: str


@dataclass
class Explanation:
    task_id: str
    status: TaskStatus
    reason: str
    next_action: str
    steps: list[StepRecord]
    decisions: list[str]
