"""Surface activities: tell the task's surface what happened (started, reply, approval).

They dispatch on `context.surface` to the surface's poster module, as the table of surfaces
says (`config.surface_kinds`: `activities.slack.surface`, `activities.github.surface`,
`activities.discord.surface`, ...), each with the same four functions. The CLI surface needs
no push: `openloop ask` follows the task through its `status` query and result. Nor does the
eval surface: `openloop eval run` reads each task's reply from its result and decides its
approvals itself (`surfaces.evals.runner`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.runtime import runtime
from config.surface_kinds import NO_PUSH, SURFACE_KINDS
from workflows.errors import ErrorType
from workflows.types import (
    ActivityName,
    PostApprovalRequestInput,
    PostApprovalRequestResult,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
)

EVAL_SURFACE = "eval"  # tasks of `openloop eval run`: nothing is posted, no outside write is made


def _surface_module(context: SurfaceContext) -> ModuleType | None:
    if context.surface in NO_PUSH:
        return None
    kind = SURFACE_KINDS.get(context.surface)
    name = kind.poster if kind is not None else None
    if name is None:
        raise ApplicationError(
            f"unknown surface {context.surface!r}", type=ErrorType.TOOL_CONFIG_ERROR, non_retryable=True
        )
    return importlib.import_module(name)


@activity.defn(name=ActivityName.TASK_STARTED)
async def task_started(inp: PostReplyInput) -> None:
    module = _surface_module(inp.context)
    if module is not None:
        await module.task_started(inp, runtime())


@activity.defn(name=ActivityName.POST_REPLY)
async def post_reply(inp: PostReplyInput) -> None:
    module = _surface_module(inp.context)
    if module is not None:
        await module.post_reply(inp, runtime())


@activity.defn(name=ActivityName.POST_APPROVAL_REQUEST)
async def post_approval_request(inp: PostApprovalRequestInput) -> PostApprovalRequestResult:
    module = _surface_module(inp.context)
    if module is None:
        return PostApprovalRequestResult()
    result: PostApprovalRequestResult = await module.post_approval_request(inp, runtime())
    return result


@activity.defn(name=ActivityName.RESOLVE_APPROVAL_REQUEST)
async def resolve_approval_request(inp: ResolveApprovalRequestInput) -> None:
    module = _surface_module(inp.context)
    if module is not None:
        await module.resolve_approval_request(inp, runtime())
