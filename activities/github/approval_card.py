"""The bodies of the GitHub comment that asks for an approval, and of the same comment once
decided. Pure functions.

Any tool's request shows its exact arguments as JSON. A draft pull request
(`github.create_pull_request`) shows what a reviewer decides on instead: the title and body,
the repository and base, the diff's stat, the tests before and after, what the sandbox's
network allowlist refused, model and cost so far, the start of the patch and the command that
prints all of it.
"""

from __future__ import annotations

import json
import re

from activities.github.client import bounded
from workflows.pull_request_card import PullRequestCard
from workflows.types import ApprovalRequest, ResolveApprovalRequestInput

MAX_ARGS = 3_000


def _arguments(arguments: dict[str, object]) -> str:
    return bounded(json.dumps(arguments, indent=2, sort_keys=True, default=str), MAX_ARGS)


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so the text cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _facts(card: PullRequestCard) -> str:
    blocked = "".join(f"  - {line}\n" for line in card.shown_blocked())
    return (
        f"- Repository: `{card.repo}` → `{card.base}`\n"
        f"- Diff: {card.diff} (`{card.short_sha}`)\n"
        f"- Tests before: {card.tests_before}\n"
        f"- Tests after: {card.tests_after}\n"
        + (f"- The sandbox's network allowlist refused:\n{blocked}" if blocked else "")
        + f"- Model: `{card.model}` · cost so far: {card.cost}"
    )


def _pull_request(card: PullRequestCard) -> str:
    quoted = "\n".join(f"> {line}".rstrip() for line in card.short_body().splitlines())
    preview = card.shown_preview()
    fence = _fence(preview)
    command = f"`{card.full_diff}`" if card.full_diff else "the task's CLI"
    return (
        f"**{card.title or '(no title)'}**\n\n"
        + (f"{quoted}\n\n" if quoted else "")
        + f"{_facts(card)}\n\n"
        + (f"{fence}diff\n{preview}\n{fence}\n\n" if preview else "")
        + f"The start of the patch; all of it: {command}"
    )


def approval_body(task_id: str, agent: str, request: ApprovalRequest) -> str:
    approvers = ", ".join(f"`{a}`" for a in request.approvers) or "none named"
    card = PullRequestCard.of(request)
    if card is not None:
        return (
            f"**Approval needed**: agent `{agent}` wants to open a draft pull request "
            f"(`{request.tool}`):\n\n{_pull_request(card)}\n\n"
            f"Expires: {request.expires_at_iso}\n"
            f"Approvers: {approvers}\n\n"
            f"Approve with `openloop approve {task_id}` or deny with `openloop deny {task_id}`."
        )
    return (
        f"**Approval needed**: agent `{agent}` wants to run `{request.tool}`:\n\n"
        f"```json\n{_arguments(request.arguments)}\n```\n\n"
        f"Model: `{request.model}` · estimated cost: ${request.estimated_cost_usd:.4f}"
        f" · expires: {request.expires_at_iso}\n"
        f"Approvers: {approvers}\n\n"
        f"Approve with `openloop approve {task_id}` or deny with `openloop deny {task_id}`."
    )


def shows_decision(body: str) -> bool:
    """Whether an approval comment was already resolved (`resolved_body`), not pending."""
    return body.startswith("**Approval ") and not body.startswith("**Approval needed**")


def resolved_body(task_id: str, inp: ResolveApprovalRequestInput) -> str:
    who = f" by `{inp.decided_by}`" if inp.decided_by else ""
    head = (
        f"**Approval {inp.outcome}**{who} at {inp.decided_at_iso}: `{inp.request.tool}` for task `{task_id}`."
    )
    card = PullRequestCard.of(inp.request)
    if card is not None:
        return f"{head}\n\n**{card.title or '(no title)'}**\n\n{_facts(card)}"
    return f"{head}\n\n```json\n{_arguments(inp.request.arguments)}\n```"
