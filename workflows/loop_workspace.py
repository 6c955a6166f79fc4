"""A loop's workspace, as the loop workflow reaches it: taken on the shared loop queue, then
every command and diff on the queue of the worker that holds it.

A part of `workflows.repair_loop`, composed, not inherited. A heartbeat or pickup timeout (or
the worker saying it no longer holds the workspace) raises `WorkspaceLost`, and the loop takes
the workspace again elsewhere; those activities run once, because a second attempt on a dead
worker's queue would wait for nobody.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import (
        ON_HOLDING_WORKER_RETRY,
        WORKSPACE_ACQUIRE_RETRY,
        WORKSPACE_CLONE_TIMEOUT,
        WORKSPACE_COMMAND_GRACE,
        WORKSPACE_DIFF_TIMEOUT,
    )
    from workflows.errors import ErrorType
    from workflows.loop_types import (
        AcquireRequest,
        CommandRequest,
        CommandResult,
        DiffRequest,
        DiffSnapshot,
        ExtraRepo,
        Limits,
        LoopActivity,
        LoopInput,
        RepoSource,
        Sandbox,
        WorkerTimeouts,
        WorkspaceHandle,
    )
    from workflows.patch_ledger import LOOP_SHUTDOWN_IS_LOST, patched

_T = TypeVar("_T")
# temporalio's failure type for an activity cut short by its worker's graceful stop.
WORKER_SHUTDOWN = "WorkerShutdown"


class WorkspaceLost(Exception):
    """The worker holding the workspace stopped answering: rebuild it elsewhere."""

    def __init__(self, message: str, *, shutdown: bool = False) -> None:
        super().__init__(message)
        self.shutdown = shutdown  # the worker stopped gracefully (a deploy), not a crash


def interruption(lost: WorkspaceLost, round_: int, step: str | None) -> str:
    """What a round's report says of a command cut short with its workspace."""
    what = f"round {round_} {step}" if step else f"round {round_}"
    how = "by a worker shutdown" if lost.shutdown else "when its worker stopped answering"
    return f"{what} interrupted {how}; run again on a new workspace"


def why(err: BaseException) -> str:
    """An activity failure's cause in words."""
    cause = err.cause if isinstance(err, ActivityError) else err
    return str(cause or err)


def _lost(err: ActivityError) -> bool:
    cause = err.cause
    if isinstance(cause, TimeoutError):
        return True
    if not isinstance(cause, ApplicationError):
        return False
    if cause.type == ErrorType.WORKSPACE_LOST:
        return True
    # A graceful stop is not a failure: the workspace goes with the worker, so take it again.
    return cause.type == WORKER_SHUTDOWN and patched(LOOP_SHUTDOWN_IS_LOST)


async def acquire(inp: LoopInput, last_diff: DiffSnapshot | None) -> WorkspaceHandle:
    """A workspace on whichever loop worker takes it: the base, plus the last stored diff."""
    return await take(
        inp.loop_id, inp.spec.repo, last_diff, inp.loop_queue, inp.timeouts, inp.spec.sandbox.repos,
        inp.spec.sandbox, inp.spec.limits,
    )  # fmt: skip


async def take(
    owner_id: str,
    repo: RepoSource,
    last_diff: DiffSnapshot | None,
    queue: str,
    timeouts: WorkerTimeouts,
    repos: list[ExtraRepo] | None = None,
    sandbox: Sandbox | None = None,
    limits: Limits | None = None,
) -> WorkspaceHandle:
    """A workspace for a loop or a coding task (`owner_id`), taken on the shared loop queue,
    with the sandbox's `repos` cloned read-only into it and its `setup` run (or restored)."""
    diff_sha = last_diff.sha256 if last_diff else None
    # Only a sandbox with a setup travels: the request of one without stays as it was.
    setup = {"sandbox": sandbox, "limits": limits or Limits()} if sandbox and sandbox.setup else {}
    return await workflow.execute_activity(
        LoopActivity.ACQUIRE_WORKSPACE,
        AcquireRequest(loop_id=owner_id, repo=repo, diff_sha=diff_sha, repos=repos or [], **setup),
        result_type=WorkspaceHandle,
        task_queue=queue,
        start_to_close_timeout=WORKSPACE_CLONE_TIMEOUT,
        heartbeat_timeout=timedelta(seconds=timeouts.heartbeat_s),
        retry_policy=WORKSPACE_ACQUIRE_RETRY,
        summary="rebuild the workspace" if last_diff else "clone the workspace",
    )


async def run_command(inp: LoopInput, request: CommandRequest) -> CommandResult:
    run_limit = timedelta(seconds=inp.spec.limits.command_timeout_s) + WORKSPACE_COMMAND_GRACE
    summary = f"round {request.round}: {request.step}"
    return await on_workspace(
        inp.timeouts, request.workspace, LoopActivity.RUN_COMMAND, request, CommandResult, run_limit, summary
    )


async def save_diff(inp: LoopInput, workspace: WorkspaceHandle, round_: int) -> DiffSnapshot:
    request = DiffRequest(loop_id=inp.loop_id, workspace=workspace, round=round_)
    summary = f"round {round_}: save diff"
    return await on_workspace(
        inp.timeouts,
        workspace,
        LoopActivity.SAVE_DIFF,
        request,
        DiffSnapshot,
        WORKSPACE_DIFF_TIMEOUT,
        summary,
    )


async def on_workspace(
    timeouts: WorkerTimeouts,
    workspace: WorkspaceHandle,
    activity: str,
    request: object,
    result_type: type[_T],
    run_limit: timedelta,
    summary: str,
) -> _T:
    try:
        return await workflow.execute_activity(
            activity,
            request,
            result_type=result_type,
            task_queue=workspace.task_queue,
            start_to_close_timeout=run_limit,
            schedule_to_start_timeout=timedelta(seconds=timeouts.pickup_s),
            heartbeat_timeout=timedelta(seconds=timeouts.heartbeat_s),
            retry_policy=ON_HOLDING_WORKER_RETRY,
            summary=summary,
        )
    except ActivityError as err:
        if _lost(err):
            shutdown = isinstance(err.cause, ApplicationError) and err.cause.type == WORKER_SHUTDOWN
            raise WorkspaceLost(f"{workspace.worker}: {why(err)}", shutdown=shutdown) from None
        raise
