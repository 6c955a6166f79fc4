"""What the agent says in a Linear session: pure functions from a task's events to an agent
activity's content (`{"type": ..., "body": ...}`, or an action's action/parameter/result).

The answer is a `response`, or an `error` when the task failed, or an `elicitation` when it
waits for the user (Linear then shows the session as awaiting input). An approval is an
`elicitation` naming the tool, its exact arguments, who may decide, the cost so far and how to
answer; its decision is a `thought`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from workflows.types import ApprovalRequest, TaskStatus

# Outside the untrusted blocks of a Linear task's request, the line naming the issue and its
# team (`surfaces.linear.events.request_for` writes it; `activities.offline.linear` reads it).
ISSUE_LINE = "Linear issue {identifier} (team {team})"
MAX_ARGS = 3_000
MAX_RESULT = 1_500
MAX_PARAMETER = 300
# The statuses a task ends in when it could not do the work (an `error` activity).
FAILED = (TaskStatus.ERROR, TaskStatus.BUDGET_EXHAUSTED, TaskStatus.NO_PROGRESS)
ANSWER_HINT = 'Reply in this thread with "approve" or "deny" (or "yes" / "no").'


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def usd(value: float) -> str:
    return "$0" if value <= 0 else (f"${value:.4f}" if value >= 0.0001 else f"${value:.8f}".rstrip("0"))


def started(task_id: str, note: str, url: str | None) -> dict[str, Any]:
    """The task's first sign; `note` says why it has not started yet (queued), if so."""
    where = f" ([follow it]({url}))" if url else ""
    return {"type": "thought", "body": (note.strip() or f"Started task `{task_id}`.") + where}


def reply(text: str, status: TaskStatus) -> dict[str, Any]:
    if status == TaskStatus.WAITING_USER:
        return {"type": "elicitation", "body": text}
    if status in FAILED:
        return {"type": "error", "body": text}
    return {"type": "response", "body": text}


def approval(request: ApprovalRequest, agent: str) -> dict[str, Any]:
    arguments = _cut(json.dumps(request.arguments, indent=2, sort_keys=True, default=str), MAX_ARGS)
    fence = _fence(arguments)
    approvers = ", ".join(f"`{a}`" for a in request.approvers) or "nobody"
    cost = usd(request.estimated_cost_usd)
    lines = [
        f"**Approval needed**: {agent} wants to run `{request.tool}` with:",
        f"{fence}json\n{arguments}\n{fence}",
        f"- Who may decide: {approvers}",
        f"- Estimated cost to finish: {cost} ({request.model})"
        + (f"; {request.estimate_note}" if request.estimate_note else ""),
        f"- Expires: {request.expires_at_iso}",
        "",
        ANSWER_HINT + " It can also be decided on the dashboard or with "
        f"`openloop approve {request.request_id}`.",
    ]
    return {"type": "elicitation", "body": "\n".join(lines)}


def resolved(tool: str, outcome: str, decided_by: str | None) -> dict[str, Any]:
    by = f" by `{decided_by}`" if decided_by else ""
    return {"type": "thought", "body": f"Approval for `{tool}` {outcome}{by}."}


def action(tool: str, arguments: dict[str, object], result: str, ok: bool) -> dict[str, Any]:
    """A tool call as Linear shows it: what was done, on what, and what came of it."""
    parameter = ", ".join(f"{k}={v}" for k, v in sorted(arguments.items()) if not isinstance(v, dict | list))
    outcome = result.strip().splitlines()[0] if result.strip() else ("done" if ok else "failed")
    return {
        "type": "action",
        "action": tool,
        "parameter": _cut(parameter or "(no arguments)", MAX_PARAMETER),
        "result": _cut(outcome if ok else f"failed: {outcome}", MAX_RESULT),
    }
