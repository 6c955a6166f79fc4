"""Run one command line of a repair loop inside bubblewrap, with limits, and say how it ended.

The command sees its workspace (read-write, also its working directory), its repository
read-only at `.git`, the system directories and the worker's Python (read-only), a private
/tmp, and only the variables it is given and those of the sandbox's `env_file` (read as it
starts, handed to bwrap through a file descriptor, never its command line, and masked in what
is kept of the output: `activities.loops.env_file`); no network unless the loop asks for it
(all of it, or an allowlist's hosts through per-command proxies: `activities.loops.egress`).
Memory and process limits are the kernel's (see `activities.loops.bwrap`); a watcher also
sums the tree's memory with its in-memory files. A command that cannot be sandboxed is never
run unconfined: `run_sandboxed` raises `SandboxUnavailable` (`sandbox_probe` tells whether
this worker can make one). Provider "none" runs it directly with the same limits and
scrubbed environment, and the outcome says so (`sandboxed=False`). Temporal and the loop's
meaning of each step stay out of this module."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from activities.loops.bwrap import (
    SYSTEM_PATH,
    as_root,
    bwrap_argv,
    command_env,
    env_args_fd,
    hand_over,
    repos_moved,
    sandbox_uid,
    tmpfs_used_bytes,
)
from activities.loops.egress.session import EgressMount, EgressSession
from activities.loops.env_file import EnvFileError, load_env, masked_run
from activities.loops.run_record import OutputLog, RunOutcome, judge_exit, judge_fork_refusal
from activities.loops.sandbox_probe import SandboxUnavailable, prlimit_argv, sandbox_problem
from workflows.egress_report import EgressReport
from workflows.loop_types import Limits, Outcome, Sandbox

__all__ = ["Progress", "RunOutcome", "SandboxRun", "SandboxUnavailable", "run_sandboxed", "sandbox_problem"]

WATCH_INTERVAL_S = 0.2  # how often memory, process count and both clocks are checked
KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL: time for a test runner to clean up
DRAIN_TIMEOUT_S = 1.0  # output still arriving after the command ended


@dataclass(frozen=True)
class SandboxRun:
    command: str  # a shell line, run by /bin/sh -c
    workspace: Path  # the only writable host path, at the same path inside; the working directory
    env: Mapping[str, str]  # the only variables the command sees, besides PATH, HOME and LANG defaults
    limits: Limits
    sandbox: Sandbox
    log_path: Path  # the command's output, outside the workspace; keeps the last limits.output_kb KB
    git_dir: Path | None = None  # the workspace's repository, shown read-only at `.git`


@dataclass(frozen=True)
class Progress:
    pid: int
    elapsed_s: float
    output_bytes: int
    bytes_per_s: float  # since the previous report
    egress: EgressReport | None = None  # with a network allowlist: what its proxies saw so far


async def run_sandboxed(
    run: SandboxRun, on_progress: Callable[[Progress], None] | None = None, progress_every_s: float = 1.0
) -> RunOutcome:
    sandboxed = run.sandbox.provider != "none"
    if sandboxed:
        if run.sandbox.provider != "bubblewrap":
            raise ValueError(f"unknown sandbox provider {run.sandbox.provider!r}: use 'bubblewrap' or 'none'")
        problem = await asyncio.to_thread(sandbox_problem)
        if problem:
            raise SandboxUnavailable(problem)
    started = time.monotonic()
    if sandboxed and isinstance(run.sandbox.network, list):
        # Its proxies live as long as the command; what they saw is part of how it ended.
        async with EgressSession(run.sandbox.network) as egress:
            tell = on_progress

            def seen(progress: Progress) -> None:  # a running command's status shows what was blocked
                if tell is not None:
                    tell(replace(progress, egress=egress.report()))

            watch = seen if on_progress is not None else None
            ended = await _start(run, started, sandboxed, watch, progress_every_s, egress.mount())
        return replace(ended, egress=egress.report())
    return await _start(run, started, sandboxed, on_progress, progress_every_s)


async def _start(
    run: SandboxRun,
    started: float,
    sandboxed: bool,
    on_progress: Callable[[Progress], None] | None,
    progress_every_s: float,
    egress: EgressMount | None = None,
) -> RunOutcome:
    workspace = run.workspace.resolve()
    needed = [workspace, *(Path(path) for path in run.sandbox.read_only if sandboxed)]
    missing = [path for path in needed if not path.exists()]
    if missing:
        return _not_started(f"could not start: {missing[0]} does not exist", started, sandboxed)
    try:
        env_file = await asyncio.to_thread(load_env, run.sandbox)  # read now: it may have changed
    except EnvFileError as error:
        return _not_started(f"could not start: {error}", started, sandboxed)
    if sandboxed and (moved := repos_moved(workspace, run.sandbox)):
        return _not_started(f"could not start: {moved}", started, sandboxed)
    variables = env_file.values | dict(run.env)  # the worker's listed variables and the step's win
    fds: tuple[int, ...] = ()
    if sandboxed:
        env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}  # bwrap clears it again for the command
        if as_root():
            await asyncio.to_thread(hand_over, workspace, sandbox_uid(workspace))
        fds = (env_args_fd(variables, egress),)
        limits, sandbox = run.limits, run.sandbox
        argv = bwrap_argv(run.command, workspace, variables, limits, sandbox, run.git_dir, egress, fds[0])
    else:
        argv, env = ["/bin/sh", "-c", run.command], command_env(variables)
    supervision = _Supervision(OutputLog(run.log_path, run.limits.output_kb), run.limits, sandboxed)
    try:
        await asyncio.get_running_loop().subprocess_exec(
            lambda: supervision,
            *prlimit_argv(run.limits),
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=workspace,
            env=env,
            start_new_session=True,
            pass_fds=fds,
        )
    except OSError as error:
        supervision.log.close()
        return _not_started(f"could not start: {error}", started, sandboxed)
    finally:
        for fd in fds:
            os.close(fd)
    ended = await supervision.run(on_progress, progress_every_s)
    return await asyncio.to_thread(masked_run, ended, run.log_path, env_file.secrets())


def _not_started(reason: str, started: float, sandboxed: bool) -> RunOutcome:
    duration = time.monotonic() - started
    return RunOutcome(Outcome.ABNORMAL, None, duration, 0, "", reason, sandboxed)


class _Supervision(asyncio.SubprocessProtocol):
    """One running command: its output streamed to the log, its limits watched, its end told.

    A protocol rather than asyncio's Process, whose wait() also waits for the output pipe to
    close, which a background process left behind by an unconfined command holds open."""

    def __init__(self, log: OutputLog, limits: Limits, sandboxed: bool):
        self.log = log
        self.limits = limits
        self.sandboxed = sandboxed
        self.started = self.last_output = time.monotonic()
        self.output_bytes = 0
        self.verdict: tuple[Outcome, str] | None = None  # set when we end it
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()
        self.transport: asyncio.SubprocessTransport | None = None
        self.pid = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport, self.pid = transport, transport.get_pid()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        self.log.write(data)
        self.output_bytes += len(data)
        self.last_output = time.monotonic()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.output_closed.done():
            self.output_closed.set_result(None)

    def process_exited(self) -> None:
        self.exited.set_result(None)

    async def run(self, on_progress: Callable[[Progress], None] | None, every_s: float) -> RunOutcome:
        assert self.transport is not None
        watcher = asyncio.create_task(self._watch(on_progress, every_s))
        try:
            await asyncio.wait([self.exited, watcher], return_when=asyncio.FIRST_COMPLETED)
            if watcher.done():
                watcher.result()  # a failing progress callback ends the run with its error
            await asyncio.shield(self.exited)  # a cancelled run must not cancel the shared future
            self._signal_tree(signal.SIGKILL)  # what an unconfined command left in the background
            with suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.output_closed), DRAIN_TIMEOUT_S)
        except BaseException:
            self._signal_tree(signal.SIGKILL)
            await asyncio.shield(self.exited)
            raise
        finally:
            watcher.cancel()
            self.transport.close()
            self.log.close()
        duration = time.monotonic() - self.started
        if self.verdict is not None:
            (outcome, reason), exit_code = self.verdict, None
        else:
            outcome, exit_code, reason = judge_exit(self.transport.get_returncode() or 0)
            if refused := judge_fork_refusal(outcome, self.log.tail(), self.limits.max_processes):
                outcome, reason = Outcome.ABNORMAL, refused
        return RunOutcome(
            outcome, exit_code, duration, self.output_bytes, self.log.tail(), reason, self.sandboxed
        )

    async def _watch(self, on_progress: Callable[[Progress], None] | None, every_s: float) -> None:
        reported_at, reported_bytes = self.started, 0
        while self.verdict is None:
            await asyncio.sleep(WATCH_INTERVAL_S)
            now = time.monotonic()
            self.verdict = self._check_clocks(now) or await asyncio.to_thread(self._check_tree)
            if on_progress is not None and now - reported_at >= every_s:
                speed = (self.output_bytes - reported_bytes) / (now - reported_at)
                on_progress(Progress(self.pid, now - self.started, self.output_bytes, speed))
                reported_at, reported_bytes = now, self.output_bytes
        self._signal_tree(signal.SIGTERM)
        with suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.exited), KILL_GRACE_S)
        self._signal_tree(signal.SIGKILL)

    def _check_clocks(self, now: float) -> tuple[Outcome, str] | None:
        if now - self.started > self.limits.command_timeout_s:
            return Outcome.TIMED_OUT, f"ran past the {self.limits.command_timeout_s:g} s limit"
        if now - self.last_output > self.limits.stall_timeout_s:
            return Outcome.STALLED, f"no output for {self.limits.stall_timeout_s:.1f} s"
        return None

    def _check_tree(self) -> tuple[Outcome, str] | None:
        tree = self._tree()
        # Files in the sandbox's /tmp and /dev/shm are memory too.
        in_files = tmpfs_used_bytes(tree[1].pid) if self.sandboxed and len(tree) > 1 else 0
        used_mb = (sum(_rss(member) for member in tree) + in_files) >> 20
        if used_mb > self.limits.memory_mb:
            return Outcome.OUT_OF_MEMORY, f"used {used_mb} MB, over the {self.limits.memory_mb} MB limit"
        if len(tree) > self.limits.max_processes:
            return Outcome.ABNORMAL, f"started more than {self.limits.max_processes} processes"
        return None

    def _tree(self) -> list[psutil.Process]:
        if self.exited.done():  # reaped: its pid may be someone else's now
            return []
        with suppress(psutil.Error):
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        return []

    def _signal_tree(self, sig: signal.Signals) -> None:
        members = self._tree()
        if sig == signal.SIGTERM and self.sandboxed:
            # bwrap ends when the command does; ending bwrap first would SIGKILL the command
            # before it could clean up.
            members = [member for member in members if member.pid != self.pid]
        for member in members:
            with suppress(psutil.Error):
                member.send_signal(sig)
        if not self.sandboxed:  # a sandboxed tree dies with its pid namespace
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)


def _rss(member: psutil.Process) -> int:
    with suppress(psutil.Error):
        return int(member.memory_info().rss)
    return 0
