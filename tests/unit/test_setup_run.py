"""`activities.loops.setup_run.prepare` with unconfined commands (`provider: none`, so a counter
outside the workspace can count runs): the first workspace runs the setup and caches what it
made, the next restores it with its own path written in, a setup that edits tracked files is
never cached, and a failing one says which command failed and why. The same in bubblewrap,
with a real pip and the egress proxies, is `tests/integration/test_loop_setup.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.loops import workspace
from activities.loops.setup_run import SetupFailed, SetupPlace, prepare
from workflows.loop_template import step_environment
from workflows.loop_types import Limits, Sandbox
from workflows.setup_types import SandboxSetup

LIMITS = Limits(command_timeout_s=30, stall_timeout_s=30)


class Outputs:
    def __init__(self) -> None:
        self.stored: list[bytes] = []

    async def __call__(self, output: bytes, truncated: bool) -> int:
        self.stored.append(output)
        return len(self.stored)


async def _place(tmp_path: Path, name: str, commands: list[str]) -> SetupPlace:
    source = tmp_path / "source"
    if not source.exists():
        source.mkdir()
        (source / "requirements.txt").write_text("demo\n")
        (source / "calc.py").write_text("x = 1\n")
    path = tmp_path / "workspaces" / name / "repo"
    await workspace.copy_local(source, path)
    return SetupPlace(
        workspace=path,
        repo=f"path:{source}",
        sandbox=Sandbox(provider="none", setup=SandboxSetup(commands=commands)),
        limits=LIMITS,
        env=step_environment(str(path), str(path), 0, "setup"),
        log_path=tmp_path / "logs" / f"{name}.log",
        cache_root=tmp_path / "workspaces" / ".setup-cache",
        cache_bytes=1 << 20,
    )


async def test_the_next_workspace_restores_instead_of_running(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    commands = [f"echo ran >> {counter}", 'mkdir -p .venv && echo "$OPENLOOP_WORKSPACE/.venv" > .venv/home']
    outputs = Outputs()
    first = await prepare(await _place(tmp_path, "a", commands), outputs)
    second_place = await _place(tmp_path, "b", commands)
    second = await prepare(second_place, outputs)

    assert first.passed and not first.reused and first.cached.startswith("cached (") and first.commands == 2
    assert second.passed and second.reused and second.output_id == 2
    assert counter.read_text() == "ran\n"  # the commands ran once
    assert (second_place.workspace / ".venv" / "home").read_text() == f"{second_place.workspace}/.venv\n"
    assert b"$ echo ran >> " in outputs.stored[0] and b"did not run" in outputs.stored[1]


async def test_a_setup_that_edits_tracked_files_runs_every_time(tmp_path: Path) -> None:
    commands = ["echo 'x = 2' > calc.py", "mkdir -p build"]
    first = await prepare(await _place(tmp_path, "a", commands), Outputs())
    second = await prepare(await _place(tmp_path, "b", commands), Outputs())
    assert first.cached == "not cached: it changed calc.py, tracked by git"
    assert not second.reused


async def test_a_failing_setup_names_its_command_and_last_error(tmp_path: Path) -> None:
    commands = ["echo fine", "echo 'ERROR: no wheel for demo' >&2 && false", "echo never"]
    outputs = Outputs()
    with pytest.raises(SetupFailed) as failed:
        await prepare(await _place(tmp_path, "a", commands), outputs)
    reason = "`echo 'ERROR: no wheel for demo' >&2 && false` exited 1: ERROR: no wheel for demo"
    assert str(failed.value) == f"setup failed: {reason}"
    assert failed.value.report.reason == reason and failed.value.report.output_id == 1
    assert b"$ echo fine\nfine\n" in outputs.stored[0] and b"never" not in outputs.stored[0]  # stopped there
