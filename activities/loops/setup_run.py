"""A workspace's `sandbox.setup`, run once when the workspace is taken: restored from this
worker's cache when the repository, its lockfiles and the setup are the same as before, else
its commands run in the sandbox with the setup's own network allowlist, their output stored
like a command's, and what they left untracked cached for the next workspace.

Whatever setup made is excluded from the workspace's diff. A setup that fails raises
`SetupFailed` with its report: the loop stops there, with the reason, instead of running
commands in a workspace without its dependencies. Temporal stays out of this module."""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from activities.loops import setup_cache
from activities.loops.output_reading import last_error
from activities.loops.sandbox import SandboxRun, run_sandboxed
from activities.loops.workspace import git_dir
from workflows.egress_report import egress_lines
from workflows.loop_types import Limits, Outcome, RepoSource, Sandbox
from workflows.setup_types import SetupReport

__all__ = ["SetupFailed", "SetupPlace", "prepare", "repo_identity", "setup_script"]

StoreOutput = Callable[[bytes, bool], Awaitable[int]]  # (output, truncated) -> its stored id
_SHOWN = "$ "  # each command is printed before it runs, so its output can be told apart
_REASON_CHARS = 600


class SetupFailed(RuntimeError):
    def __init__(self, message: str, report: SetupReport):
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class SetupPlace:
    """Where one workspace's setup runs and what it may use."""

    workspace: Path
    repo: str  # the repository's identity (`repo_identity`), part of the cache key
    sandbox: Sandbox  # with its `setup`
    limits: Limits
    env: Mapping[str, str]  # the worker variables and step variables the commands see
    log_path: Path
    cache_root: Path
    cache_bytes: int  # 0: no cache


def repo_identity(repo: RepoSource) -> str:
    return f"github:{repo.github}" if repo.github else f"path:{Path(repo.path or '').resolve()}"


def setup_script(commands: list[str]) -> str:
    """One shell script: each command printed, then run; the first that fails ends it with its
    status (`{ a && b\n}` fails as a whole, where `set -e` would let `a` fail silently)."""
    lines: list[str] = []
    for command in commands:
        lines.append(f"printf '%s\\n' {shlex.quote(_SHOWN + command)}")
        lines.append(f"{{ {command}\n}} || exit $?")
    return "\n".join(lines) + "\n"


def _failed_command(output: str, commands: list[str]) -> str:
    shown = [line[len(_SHOWN) :] for line in output.splitlines() if line.startswith(_SHOWN)]
    ran = [line for line in shown if line in commands]
    return ran[-1] if ran else commands[0]


def _its_output(tail: str, command: str) -> str:
    """What the failed command printed: the tail after the line that announced it."""
    lines = tail.splitlines()
    starts = [index for index, line in enumerate(lines) if line == _SHOWN + command]
    return "\n".join(lines[starts[-1] + 1 :]) if starts else tail


async def prepare(place: SetupPlace, store_output: StoreOutput) -> SetupReport:
    """Restore the setup's output from the cache, or run it (raising `SetupFailed`) and cache it."""
    setup = place.sandbox.setup
    assert setup is not None
    use_cache = setup.cache and place.cache_bytes > 0
    key = await setup_cache.cache_key(place.workspace, place.repo, place.sandbox) if use_cache else ""
    restored = await _restored(place, key, store_output) if key else None
    if restored is not None:
        return restored
    before = await setup_cache.untracked(place.workspace)
    report = await _run(place, store_output)
    made = sorted(await setup_cache.untracked(place.workspace) - before)
    await asyncio.to_thread(setup_cache.exclude, git_dir(place.workspace), made)
    # A restore brings back new files only: a setup that edits tracked ones (`npm install`
    # rewriting its lockfile) is run every time, and its edits join the loop's diff.
    edited = await setup_cache.changed(place.workspace)
    if not setup.cache:
        cached = "not cached: cache: false"
    elif not key:
        cached = "not cached: OPENLOOP_SETUP_CACHE_MB is 0"
    elif edited:
        cached = (
            f"not cached: it changed {', '.join(edited[:3])}{' …' if len(edited) > 3 else ''}, tracked by git"
        )
    else:
        await asyncio.to_thread(place.cache_root.mkdir, parents=True, exist_ok=True)
        cached = await setup_cache.save(
            place.cache_root, key, place.workspace, made, report.duration_s, place.cache_bytes
        )
    return report.model_copy(update={"cached": cached})


async def _restored(place: SetupPlace, key: str, store_output: StoreOutput) -> SetupReport | None:
    setup = place.sandbox.setup
    assert setup is not None
    started = time.monotonic()
    restored = await setup_cache.restore(place.cache_root, key, place.workspace)
    if restored is None:
        return None
    await asyncio.to_thread(setup_cache.exclude, git_dir(place.workspace), restored.entries)
    took = time.monotonic() - started
    note = (
        f"restored from this worker's setup cache (key {key[:12]}) in {took:.1f} s: "
        f"{', '.join(restored.entries)}, made at {restored.made_at} in {restored.duration_s:.1f} s; "
        "the setup commands did not run\n"
    )
    return SetupReport(
        passed=True, reused=True, duration_s=round(took, 3), commands=len(setup.commands),
        output_id=await store_output(note.encode(), False), cached=f"key {key[:12]}",
    )  # fmt: skip


async def _run(place: SetupPlace, store_output: StoreOutput) -> SetupReport:
    """The commands in the sandbox with the setup's network; their output stored."""
    setup = place.sandbox.setup
    assert setup is not None
    run = SandboxRun(
        command=setup_script(setup.commands),
        workspace=place.workspace,
        env={**place.env, **setup.env},
        limits=place.limits,
        sandbox=place.sandbox.model_copy(update={"network": setup.network, "setup": None}),
        log_path=place.log_path,
        git_dir=git_dir(place.workspace),
    )
    ended = await run_sandboxed(run)
    output = await asyncio.to_thread(lambda: place.log_path.read_bytes() if place.log_path.exists() else b"")
    report = SetupReport(
        passed=ended.outcome is Outcome.PASSED, duration_s=round(ended.duration_s, 3),
        commands=len(setup.commands), output_id=await store_output(output, ended.output_bytes > len(output)),
        egress=ended.egress,
    )  # fmt: skip
    if not report.passed:
        command = _failed_command(output.decode(errors="replace"), setup.commands)
        how = f"exited {ended.exit_code}" if ended.outcome is Outcome.FAILED else ended.reason
        error = last_error(_its_output(ended.tail, command), _REASON_CHARS).strip()
        reason = f"`{command}` {how}" + (f": {error}" if error else "")
        # A host its allowlist refused is often why: say so where the loop's end is read.
        reason = "; ".join([reason, *egress_lines(ended.egress, allowed=False)])
        raise SetupFailed(f"setup failed: {reason}", report.model_copy(update={"reason": reason}))
    return report
