"""The sandbox's memory and process limits hold as root too: the kernel enforces them, not a
sampler that a burst outruns, and no writable in-memory filesystem is larger than the limit.
The test suite runs as root in CI, which is the case these guard (`openloop up` in a root
shell or container)."""

from __future__ import annotations

import os
from pathlib import Path

from activities.loops.bwrap import sandbox_uid
from activities.loops.sandbox import RunOutcome, SandboxRun, run_sandboxed
from workflows.loop_types import Limits, Outcome, Sandbox

LIMITS = Limits(command_timeout_s=30, stall_timeout_s=20, memory_mb=256, max_processes=50)


async def run(tmp_path: Path, command: str, limits: Limits = LIMITS) -> tuple[Path, RunOutcome]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    run = SandboxRun(command, workspace, {}, limits, Sandbox(), tmp_path / "logs" / "command.log")
    return workspace, await run_sandboxed(run)


async def test_a_fork_burst_past_the_limit_is_refused_by_the_kernel(tmp_path: Path) -> None:
    burst = "for i in $(seq 200); do (touch started.$i; sleep 3) & done; wait"
    workspace, result = await run(tmp_path, burst)
    started = len(list(workspace.glob("started.*")))
    assert started < LIMITS.max_processes, f"{started} processes ran under a limit of 50"
    assert result.outcome is Outcome.ABNORMAL
    assert "limit of 50 processes" in result.reason


async def test_files_in_dev_shm_cannot_hold_more_than_the_memory_limit(tmp_path: Path) -> None:
    fill = "head -c 800M /dev/zero > /dev/shm/fill; wc -c < /dev/shm/fill > shm-bytes"
    workspace, result = await run(tmp_path, fill)
    held = int((workspace / "shm-bytes").read_text())
    assert held <= LIMITS.memory_mb << 20
    assert "No space left on device" in result.tail


async def test_tmp_and_dev_shm_together_stay_under_the_limit(tmp_path: Path) -> None:
    both = "head -c 200M /dev/zero > /tmp/a; head -c 60M /dev/zero > /dev/shm/b; sleep 5; echo done"
    _, result = await run(tmp_path, both)
    assert result.outcome is Outcome.OUT_OF_MEMORY
    assert "over the 256 MB limit" in result.reason
    assert "done" not in result.tail


async def test_dev_is_read_only(tmp_path: Path) -> None:
    workspace, result = await run(tmp_path, "echo kept > /dev/stash && echo wrote > marker; true")
    assert not (workspace / "marker").exists()
    assert result.outcome is Outcome.PASSED


async def test_a_root_worker_runs_the_command_as_the_workspace_s_own_unprivileged_uid(tmp_path: Path) -> None:
    workspace, result = await run(tmp_path, "id -u > uid; touch made")
    uid = int((workspace / "uid").read_text())
    assert uid != 0
    if os.geteuid() == 0:
        assert uid == sandbox_uid(workspace.resolve())
        assert (workspace / "made").stat().st_uid == uid
    assert result.outcome is Outcome.PASSED
