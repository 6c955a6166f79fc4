"""A coding tool's command (code.run, code.run_tests) run in the workspace's sandbox.

The same sandbox, limits and environment rule as a repair loop's commands: bubblewrap with
the task's `CodeSetup.limits` and `.sandbox`, and only the worker variables listed in
`sandbox.env_from` plus the step variables, so a token in the worker's environment is never
seen by what a model asked to run. Progress is heartbeated when inside an activity; the
whole output is stored (`activities.store.loops.save_output`, under the task's id) and the
model gets its end.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.code.context import CodeWorkspace
from activities.code.paths import resolve_path
from activities.loops.host import loop_host
from activities.loops.sandbox import Progress, RunOutcome, SandboxRun, SandboxUnavailable, run_sandboxed
from activities.loops.workspace import git_dir
from activities.runtime import Runtime
from activities.store import loops as loop_rows
from activities.tool_errors import ToolError
from workflows.egress_blocked import CommandEgress, live_blocked, short_command
from workflows.egress_report import egress_lines
from workflows.errors import ErrorType
from workflows.loop_template import step_environment
from workflows.types import ToolCallInput

OUTPUT_TAIL_CHARS = 8000  # of a command's output shown to the model
_REPORT_MAX_BYTES = 5_000_000  # a JUnit report bigger than this is not read
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class CommandRun:
    command: str
    ended: RunOutcome
    output: str  # all that was kept of it
    output_id: int  # where it is stored whole


def command_environment(workspace: CodeWorkspace, step: int, kind: str) -> dict[str, str]:
    """The step's variables plus only the worker variables the setup lists in `env_from`."""
    listed = workspace.setup.sandbox.env_from
    allowed = {name: os.environ[name] for name in listed if name in os.environ}
    root = str(workspace.root)
    return allowed | step_environment(root, root, step, kind)


def _read_log(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


async def run_command(
    workspace: CodeWorkspace, call: ToolCallInput, rt: Runtime, command: str, kind: str
) -> CommandRun:
    """Run `command` in the workspace's sandbox; `kind` (the tool's name) names its stored output."""
    name = _UNSAFE_NAME.sub("_", call.call_id)[:64]
    log_path = loop_host().loop_dir(workspace.handle.loop_id) / "logs" / f"step-{call.step}-{kind}-{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    in_activity = activity.in_activity()

    def beat(progress: Progress) -> None:
        if in_activity:
            activity.heartbeat(
                {
                    "pid": progress.pid,
                    "tool": kind,
                    "command": command,
                    "log": str(log_path),
                    "elapsed_s": round(progress.elapsed_s, 1),
                    "output_bytes": progress.output_bytes,
                    "bytes_per_s": round(progress.bytes_per_s),
                    "blocked": live_blocked(progress.egress),
                }
            )

    run = SandboxRun(
        command=command,
        workspace=workspace.root,
        env=command_environment(workspace, call.step, kind),
        limits=workspace.setup.limits,
        sandbox=workspace.setup.sandbox,
        log_path=log_path,
        git_dir=git_dir(workspace.root),
    )
    try:
        ended = await run_sandboxed(run, beat)
    except SandboxUnavailable as exc:
        raise ApplicationError(str(exc), type=ErrorType.SANDBOX_UNAVAILABLE, non_retryable=True) from None
    if ended.egress is not None:  # the task sums what was blocked, for the approval card
        workspace.egress = CommandEgress(command=short_command(command), report=ended.egress)
    output = await asyncio.to_thread(_read_log, log_path)
    # One row per call and attempt: a step may run several commands, a retry keeps both.
    attempt = f"{call.call_id}/{activity.info().attempt if in_activity else 1}"
    output_id = await loop_rows.save_output(
        await rt.pool(), workspace.task_id, call.step, kind, attempt, output, ended.output_bytes > len(output)
    )
    return CommandRun(command, ended, output.decode(errors="replace"), output_id)


def ending(run: CommandRun) -> str:
    """How the command ended, in one line."""
    ended = run.ended
    code = "" if ended.exit_code is None else f"exit code {ended.exit_code}, "
    said = f"{code}{ended.outcome.value} after {ended.duration_s:.1f} s"
    if ended.reason and ended.outcome.abnormal:
        said += f": {ended.reason}"
    if not ended.sandboxed:
        said += " (not sandboxed: this workspace's sandbox provider is 'none')"
    if blocked := egress_lines(ended.egress, allowed=False):
        said += "; the sandbox's network allowlist " + "; ".join(blocked)
    return said


def output_tail(run: CommandRun) -> str:
    """The end of the output, with where the rest is."""
    if not run.output.strip():
        return f"(no output; stored as output {run.output_id})"
    if len(run.output) <= OUTPUT_TAIL_CHARS:
        return f"Output (stored as output {run.output_id}):\n{run.output.rstrip()}"
    return (
        f"Output, last {OUTPUT_TAIL_CHARS} of {len(run.output)} characters (stored whole as output "
        f"{run.output_id}):\n{run.output[-OUTPUT_TAIL_CHARS:].rstrip()}"
    )


def report_reader(root: Path) -> Callable[[str], str | None]:
    """Reads a test report the command wrote, only inside the workspace and never .git."""

    def read(name: str) -> str | None:
        try:
            if Path(name).is_absolute() and Path(name).is_relative_to(root):
                name = Path(name).relative_to(root).as_posix()  # pytest names its report in full
            path = resolve_path(root, name)
            if not path.is_file() or path.stat().st_size > _REPORT_MAX_BYTES:
                return None
            return path.read_text(errors="replace")
        except (ToolError, OSError):
            return None

    return read
