"""The repair loop's activities: take a workspace, run one command in it, store its diff, and
keep the loop's rows. Thin: git is `workspace`, the sandbox `sandbox`, reading test results
`output_reading`, the rows `activities.store.loops`.

Acquiring runs on the shared loop queue; the other workspace activities run on the queue of
the worker that holds the workspace (`WorkspaceHandle.task_queue`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.github.client import installation_token
from activities.loops import extra_repos, workspace
from activities.loops.host import held_workspace, loop_host
from activities.loops.output_reading import failing_tests, last_error, metric, ran_count
from activities.loops.sandbox import Progress, SandboxRun, SandboxUnavailable, run_sandboxed
from activities.loops.setup_run import SetupFailed, SetupPlace, prepare, repo_identity
from activities.runtime import runtime
from activities.store import loops as loop_rows
from workflows.egress_blocked import live_blocked
from workflows.errors import ErrorType
from workflows.loop_template import render_command, step_environment
from workflows.loop_types import (
    AcquireRequest,
    CommandRequest,
    CommandResult,
    DiffRequest,
    DiffSnapshot,
    LoopActivity,
    LoopInput,
    LoopResult,
    Outcome,
    RepoSource,
    RoundReport,
    WorkspaceHandle,
)
from workflows.setup_types import SetupReport

_TAIL_CHARS = 4000
_ACQUIRE_BEAT_SECONDS = 1.0
_REPORT_MAX_BYTES = 5_000_000  # a JUnit report bigger than this is not read


@activity.defn(name=LoopActivity.START)
async def start_loop(inp: LoopInput) -> None:
    await loop_rows.start(await runtime().pool(), inp.loop_id, inp.spec, inp.started_by)


@activity.defn(name=LoopActivity.RECORD_ROUND)
async def record_round(report: RoundReport) -> None:
    await loop_rows.record_round(await runtime().pool(), report)


@activity.defn(name=LoopActivity.FINISH)
async def finish_loop(result: LoopResult) -> None:
    await loop_rows.finish(await runtime().pool(), result)


async def _create(repo: RepoSource, path: Path) -> str:
    if repo.path:
        return await workspace.copy_local(Path(repo.path), path)
    assert repo.github
    url = f"{runtime().settings.github_git_url.rstrip('/')}/{repo.github}.git"
    token = await asyncio.to_thread(installation_token, runtime().settings, repo.github)
    return await workspace.clone(workspace.GitRemote(url, token), repo.base, path)


async def _beat_while_acquiring() -> None:
    started = time.monotonic()
    while True:
        activity.heartbeat({"step": "acquire", "elapsed_s": round(time.monotonic() - started, 1)})
        await asyncio.sleep(_ACQUIRE_BEAT_SECONDS)


@activity.defn(name=LoopActivity.ACQUIRE_WORKSPACE)
async def acquire_workspace(req: AcquireRequest) -> WorkspaceHandle:
    """A fresh workspace on this worker: the base commit, plus the stored diff when rebuilding."""
    host = loop_host()
    # Each attempt clones into a folder of its own: an earlier attempt that timed out may
    # still be writing to its folder.
    path = host.repo(req.loop_id, activity.info().attempt)
    workspace.remove(path)
    # Beat all along: a big clone takes longer than the heartbeat timeout that notices a dead worker.
    beating = asyncio.create_task(_beat_while_acquiring())
    try:
        base = await _create(req.repo, path)
        if req.diff_sha:
            patch = await loop_rows.load_diff(await runtime().pool(), req.diff_sha)
            if patch is None:
                raise workspace.WorkspaceError(f"the stored diff {req.diff_sha[:12]} is missing")
            await workspace.apply(path, patch)
        await extra_repos.add_repos(path, req.repos, runtime().settings)
        setup = await _setup(req, path) if req.sandbox.setup else None
    except workspace.WorkspaceError as exc:
        raise ApplicationError(str(exc), type=ErrorType.WORKSPACE_ERROR, non_retryable=True) from None
    except SandboxUnavailable as exc:
        raise ApplicationError(str(exc), type=ErrorType.SANDBOX_UNAVAILABLE, non_retryable=True) from None
    except SetupFailed as exc:  # the commands would run without the project's dependencies
        message = f"{exc}; its output: openloop loops logs {req.loop_id} --step setup"
        raise ApplicationError(message, exc.report, type=ErrorType.SETUP_FAILED, non_retryable=True) from None
    finally:
        beating.cancel()
    return WorkspaceHandle(
        loop_id=req.loop_id,
        task_queue=host.task_queue,
        worker=host.name,
        path=str(path),
        base_commit=base,
        restored_diff=req.diff_sha,
        setup=setup,
    )


async def _setup(req: AcquireRequest, path: Path) -> SetupReport:
    """`sandbox.setup` in the new workspace (`activities.loops.setup_run`), its output stored as round 0's."""
    host, settings, pool, info = loop_host(), runtime().settings, await runtime().pool(), activity.info()
    env = {name: os.environ[name] for name in req.sandbox.env_from if name in os.environ}
    env |= step_environment(str(path), str(path), 0, "setup")
    place = SetupPlace(
        path, repo_identity(req.repo), req.sandbox, req.limits, env, host.log(req.loop_id, 0, "setup"),
        host.setup_cache, max(0, settings.setup_cache_mb) << 20,
    )  # fmt: skip
    attempt = f"{info.workflow_run_id}/{info.activity_id}/{info.attempt}"

    async def store(output: bytes, truncated: bool) -> int:
        return await loop_rows.save_output(pool, req.loop_id, 0, "setup", attempt, output, truncated)

    return await prepare(place, store)


def _reader(root: Path) -> Callable[[str], str | None]:
    """Reads a file the command wrote, only inside the workspace (or its private /tmp)."""

    def read(name: str) -> str | None:
        try:
            real_root, target = root.resolve(), (root / name).resolve()
            inside = target.is_relative_to(real_root) and ".git" not in target.relative_to(real_root).parts
            # A pipe or a device would never end a read: only a bounded regular file is read.
            if not inside or not target.is_file() or target.stat().st_size > _REPORT_MAX_BYTES:
                return None
            return target.read_text(errors="replace")
        except OSError:
            return None

    return read


def _read_log(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _command_env(req: CommandRequest, path: Path) -> dict[str, str]:
    """The step's variables plus only the worker variables the loop lists in `env_from`."""
    allowed = {name: os.environ[name] for name in req.sandbox.env_from if name in os.environ}
    return allowed | step_environment(str(path), str(path), req.round, req.step.value)


@activity.defn(name=LoopActivity.RUN_COMMAND)
async def run_command(req: CommandRequest) -> CommandResult:
    """One command in the sandbox, heartbeating its progress; its output stored, its result read."""
    path = held_workspace(req.workspace)
    host = loop_host()
    values = {
        "workspace": str(path),
        "project_root": str(path),
        "round": str(req.round),
        "last_error": req.last_error,
    }
    command = render_command(req.command, values)
    log_path = host.log(req.loop_id, req.round, req.step.value)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def beat(progress: Progress) -> None:
        eta = max(0.0, req.expected_seconds - progress.elapsed_s) if req.expected_seconds else None
        activity.heartbeat(
            {
                "pid": progress.pid,
                "command": command,
                "log": str(log_path),
                "round": req.round,
                "step": req.step.value,
                "elapsed_s": round(progress.elapsed_s, 1),
                "output_bytes": progress.output_bytes,
                "bytes_per_s": round(progress.bytes_per_s),
                "eta_s": None if eta is None else round(eta, 1),
                "blocked": live_blocked(progress.egress),  # by its network allowlist, so far
            }
        )

    run = SandboxRun(
        command=command,
        workspace=path,
        env=_command_env(req, path),
        limits=req.limits,
        sandbox=req.sandbox,
        log_path=log_path,
        git_dir=workspace.git_dir(path),
    )
    try:
        ended = await run_sandboxed(run, beat)
    except SandboxUnavailable as exc:
        raise ApplicationError(str(exc), type=ErrorType.SANDBOX_UNAVAILABLE, non_retryable=True) from None
    output = await asyncio.to_thread(_read_log, log_path)
    info = activity.info()
    output_id = await loop_rows.save_output(
        await runtime().pool(), req.loop_id, req.round, req.step.value,
        f"{info.workflow_run_id}/{info.activity_id}/{info.attempt}", output, ended.output_bytes > len(output),
    )  # fmt: skip
    text = output.decode(errors="replace")
    return CommandResult(
        step=req.step,
        round=req.round,
        command=command,
        outcome=ended.outcome,
        exit_code=ended.exit_code,
        duration_s=round(ended.duration_s or time.monotonic() - started, 3),
        output_bytes=ended.output_bytes,
        output_id=output_id,
        tail=ended.tail[-_TAIL_CHARS:],
        failing_tests=failing_tests(text, _reader(path), command=command, root=str(path)),
        tests_ran=ran_count(text, _reader(path), command=command, root=str(path)),
        metric=metric(text, req.metric_regex) if req.metric_regex else None,
        reason=ended.reason,
        sandboxed=ended.sandboxed,
        error_summary="" if ended.outcome is Outcome.PASSED else last_error(ended.tail) or ended.reason,
        egress=ended.egress,
    )


@activity.defn(name=LoopActivity.SAVE_DIFF)
async def save_diff(req: DiffRequest) -> DiffSnapshot:
    """The workspace's diff from its base commit, stored under its hash."""
    path = held_workspace(req.workspace)
    try:
        patch = await workspace.diff(path, req.workspace.base_commit)
    except workspace.WorkspaceError as exc:
        raise ApplicationError(str(exc), type=ErrorType.WORKSPACE_ERROR, non_retryable=True) from None
    sha = await loop_rows.save_diff(await runtime().pool(), patch)
    return workspace.snapshot(sha, patch)


LOOP_STORE_ACTIVITIES = (start_loop, record_round, finish_loop)
SHARED_QUEUE_ACTIVITIES = (acquire_workspace,)
WORKSPACE_ACTIVITIES = (run_command, save_diff)
