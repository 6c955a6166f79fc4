"""The task publishes its pending approval where lists can read it: who may decide, as the
`OpenLoopApprovers` search attribute, and the request itself in the `pending_approval` memo, so
the approvals inbox lists a person's own requests from the visibility store, a page at a time,
without asking any task.

The approvers are the request's resolved set (`workflows.approval_rule.allowed_approvers`, the
one rule every decision is judged by). Both are set when the request is made and removed when
it is resolved. A set too large for a search attribute is published as `ASK_THE_TASK`, and
arguments too large for a memo are left out of it (`PendingMemo.complete` false): the inbox then
asks that task, as it asks tasks that started before any of this existed. Behind a patch
(`workflows.patch_ledger.PUBLISHED_APPROVAL`), so histories recorded before it replay
unchanged. The task still judges every decision itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from temporalio import workflow

from workflows import search
from workflows.approval_rule import allowed_approvers
from workflows.message_types import ApprovalRequest
from workflows.patch_ledger import PUBLISHED_APPROVAL, patched

MEMO = "pending_approval"
ASK_THE_TASK = "*"
MAX_IDS = 64
MAX_CHARS = 1_500  # below the visibility store's 2 KB limit for one value
MAX_MEMO_ARGUMENTS = 8_000  # characters of JSON; the memo's whole limit is 32 KB
REQUEST_PREVIEW = 300


@dataclass
class PendingMemo:
    """What the inbox shows of a waiting request, without asking the task."""

    approval: ApprovalRequest
    requester: str
    request: str  # the start of what the task was asked
    complete: bool = True  # False: the arguments were too large and are left out


def published(request: ApprovalRequest | None) -> list[str]:
    """The attribute's value for a pending request (empty: none pending, or nobody may decide)."""
    if request is None:
        return []
    ids = sorted(set(allowed_approvers(request)))
    if len(ids) > MAX_IDS or sum(len(i) + 1 for i in ids) > MAX_CHARS:
        return [ASK_THE_TASK]
    return ids


def memo_of(request: ApprovalRequest, requester: str, asked: str) -> PendingMemo:
    complete = len(json.dumps(request.arguments, default=str)) <= MAX_MEMO_ARGUMENTS
    shown = request if complete else replace(request, arguments={})
    return PendingMemo(shown, requester, asked[:REQUEST_PREVIEW], complete)


def publish(request: ApprovalRequest | None, requester: str = "", asked: str = "") -> None:
    """Set (or with None, remove) the attribute and the memo; call where the pending request
    changes. `requester` and `asked`: who asked the task, and what."""
    if not patched(PUBLISHED_APPROVAL):
        return
    value = published(request)
    update = search.APPROVERS.value_set(value) if value else search.APPROVERS.value_unset()
    workflow.upsert_search_attributes([update])
    workflow.upsert_memo({MEMO: memo_of(request, requester, asked) if request is not None else None})
