"""The Linear surface's side of the surface activities (dispatched from
activities/surface_activities.py).

A task started from Linear answers in its agent session (`context.thread` = the session id):
a `thought` when it starts (and its issue moves to the team's first started state, as Linear
asks of agents: `activities.linear.issue_state`), its answer as a `response` (`error` when it
failed, `elicitation` when it waits for the user), an approval request as an `elicitation`
and its decision as a `thought` (`activities.linear.bodies`). Every activity is created once
per key (`activities.linear.sessions`), so a retried activity adds nothing. After each tool
call of a Linear task an `action` shows it (`report_tool_call`, called by the tool activity).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from temporalio.exceptions import ApplicationError

from activities.linear import bodies
from activities.linear.client import LinearError, LinearNotConfigured, activity_error
from activities.linear.issue_state import move_to_started
from activities.linear.sessions import object_id, post_activity
from activities.runtime import Runtime
from workflows.errors import ErrorType
from workflows.types import (
    PostApprovalRequestInput,
    PostApprovalRequestResult,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
    TaskStatus,
    ToolCallInput,
    ToolCallResult,
)

log = logging.getLogger(__name__)


def _session(context: SurfaceContext) -> str:
    if not context.thread:
        raise ApplicationError(
            "Linear task has no agent session to answer in (context.thread is empty)",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    return context.thread


async def _post(rt: Runtime, context: SurfaceContext, content: dict[str, Any], key: str, doing: str) -> str:
    session = _session(context)
    try:
        await post_activity(rt.settings, session, content, key)
    except (LinearError, LinearNotConfigured, OSError) as exc:
        raise activity_error(exc, doing) from None
    return object_id(f"activity:{session}:{key}")


def task_url(rt: Runtime, task_id: str) -> str:
    from surfaces.web.auth import dashboard_base

    return f"{dashboard_base(rt.settings)}/tasks/{task_id}"


async def task_started(inp: PostReplyInput, rt: Runtime) -> None:
    content = bodies.started(inp.task_id, inp.text, task_url(rt, inp.task_id))
    key = f"started:{inp.task_id}:{inp.status.value}"
    await _post(rt, inp.context, content, key, "posting the start")
    if inp.status == TaskStatus.RUNNING and inp.context.reply_target:
        # Best effort: the issue's state says work began; the task runs either way.
        try:
            await move_to_started(rt.settings, inp.context.reply_target)
        except (LinearError, LinearNotConfigured, OSError) as exc:
            log.warning("issue %s not moved to started: %s", inp.context.reply_target, exc)


async def post_reply(inp: PostReplyInput, rt: Runtime) -> None:
    digest = hashlib.sha256(inp.text.encode()).hexdigest()[:16]
    key = f"reply:{inp.task_id}:{inp.step}:{inp.status.value}:{digest}"
    await _post(rt, inp.context, bodies.reply(inp.text, inp.status), key, "posting the answer")


async def post_approval_request(inp: PostApprovalRequestInput, rt: Runtime) -> PostApprovalRequestResult:
    key = f"approval:{inp.task_id}:{inp.request.request_id}"
    content = bodies.approval(inp.request, inp.agent_name)
    ref = await _post(rt, inp.context, content, key, "asking for an approval")
    return PostApprovalRequestResult(message_ref=f"linear:{ref}")


async def resolve_approval_request(inp: ResolveApprovalRequestInput, rt: Runtime) -> None:
    key = f"resolved:{inp.task_id}:{inp.request.request_id}:{inp.outcome}"
    content = bodies.resolved(inp.request.tool, inp.outcome, inp.decided_by)
    await _post(rt, inp.context, content, key, "showing the decision")


async def report_tool_call(inp: ToolCallInput, result: ToolCallResult, rt: Runtime) -> None:
    """An `action` activity for one tool call of a Linear task. Best effort: the tool's
    effect already happened, so a Linear outage here is logged, never a failed tool call."""
    if inp.context.surface != "linear" or not inp.context.thread:
        return
    content = bodies.action(inp.tool, inp.arguments, result.output, result.ok)
    try:
        await post_activity(rt.settings, inp.context.thread, content, f"tool:{inp.idempotency_key}")
    except (LinearError, LinearNotConfigured, OSError) as exc:
        log.warning("no action activity for %s in session %s: %s", inp.tool, inp.context.thread, exc)
