"""The task publishes who may decide its pending approval, as the `OpenLoopApprovers` search
attribute, so the approvals inbox lists a person's own requests from the visibility store
instead of asking every waiting task.

The value is the request's resolved set (`workflows.approval_rule.allowed_approvers`, the one
rule every decision is judged by), set when the request is made and removed when it is
resolved. A set too large for a search attribute is published as `ASK_THE_TASK`: the inbox then
asks that task, as it asks tasks that started before the attribute existed (they have none).
Behind a patch, so histories recorded before it replay unchanged.
"""

from __future__ import annotations

from temporalio import workflow

from workflows import search
from workflows.approval_rule import allowed_approvers
from workflows.message_types import ApprovalRequest

PATCH = "approvers-search-attribute"
ASK_THE_TASK = "*"
MAX_IDS = 64
MAX_CHARS = 1_500  # below the visibility store's 2 KB limit for one value


def published(request: ApprovalRequest | None) -> list[str]:
    """The attribute's value for a pending request (empty: none pending, or nobody may decide)."""
    if request is None:
        return []
    ids = sorted(set(allowed_approvers(request)))
    if len(ids) > MAX_IDS or sum(len(i) + 1 for i in ids) > MAX_CHARS:
        return [ASK_THE_TASK]
    return ids


def publish(request: ApprovalRequest | None) -> None:
    """Set (or with None, remove) the attribute; call where the pending request changes."""
    if not workflow.patched(PATCH):
        return
    value = published(request)
    update = search.APPROVERS.value_set(value) if value else search.APPROVERS.value_unset()
    workflow.upsert_search_attributes([update])
