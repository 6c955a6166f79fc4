"""Whether an approval decision counts: the one rule, in one place.

The task applies it to every decision: in the validator of the `openloop.task.decide` update
every surface sends (`workflows.decisions`), so the person hears at once whether it counted,
and to the approve and deny signals (`workflows.approvals.ApprovalGate`); `openloop explain`
applies it to the decisions in a recorded history (`surfaces.timeline_signals`).

Who may approve is the request's own resolved set: the user ids its approvers stood for
when it was made (user groups and `@handles` expanded by the `openloop.approval.prepare`
activity). The set is resolved once, by an activity, and carried in the request, so the
workflow stays deterministic (a group's membership is read from Slack, never in workflow
code), and whoever the set holds is accepted by every surface alike. Requests made before
resolution existed carry no set: their listed approvers are the set.

Pure: no I/O and no clock; the caller passes `now` (or None where a timer owns expiry).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from workflows.message_types import ApprovalRequest

ProblemKind = Literal["closed", "mismatch", "expired", "not_approver"]


@dataclass(frozen=True)
class DecisionProblem:
    kind: ProblemKind
    reason: str  # as the audit and the timeline record it


def allowed_approvers(request: ApprovalRequest) -> list[str]:
    """The user ids (and other surface identities, e.g. `cli:local`) that may decide."""
    return allowed_ids(request.approvers, request.approver_ids)


def allowed_ids(approvers: list[str], approver_ids: list[str] | None) -> list[str]:
    """Who may decide, given the listed approvers and the ids they were resolved to (None:
    not resolved, so the listed entries themselves). A budget extension uses it too
    (`workflows.budget_extenders`): whoever may approve may extend."""
    return list(approver_ids) if approver_ids is not None else list(approvers)


def may_decide(request: ApprovalRequest, approver: str) -> bool:
    return approver in allowed_approvers(request)


def decision_problem(
    pending: ApprovalRequest | None,
    request_id: str,
    action_id: str,
    approver: str,
    now: datetime | None,
    used_request_ids: Collection[str] = (),
) -> DecisionProblem | None:
    """Why a decision by `approver` for (request_id, action_id) does not count, or None."""
    if request_id in used_request_ids:
        return DecisionProblem("closed", "this request was already decided")
    if pending is None:
        return DecisionProblem("closed", "no approval is pending")
    if pending.request_id != request_id:
        return DecisionProblem("closed", "the decision is for another request")
    if pending.action_id != action_id:
        return DecisionProblem("mismatch", "the decision is for different arguments than the pending action")
    if now is not None and _expired(pending, now):
        return DecisionProblem("expired", "the request has expired")
    if not may_decide(pending, approver):
        return DecisionProblem("not_approver", f"{approver} is not an approver of this agent")
    return None


def _expired(request: ApprovalRequest, now: datetime) -> bool:
    try:
        return datetime.fromisoformat(request.expires_at_iso) <= now
    except ValueError:
        return False
