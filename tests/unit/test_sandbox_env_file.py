"""A sandboxed command with `sandbox.env_file`, with real bubblewrap: its keys (and only those,
with `env_from`'s and the step's) are the command's variables, read when it starts; the
values never show on a process's command line, and are masked in the kept output."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest

from activities.loops.sandbox import SandboxRun, run_sandboxed
from workflows.loop_types import Limits, Outcome, Sandbox

QUICK = Limits(command_timeout_s=20, stall_timeout_s=10)
SECRET = "s3cr3t-from-the-env-file"
PROVIDERS = pytest.mark.parametrize("provider", ["bubblewrap", "none"])


def _setup(tmp_path: Path, text: str) -> tuple[Path, Path]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env_file = tmp_path / "secrets" / "dev.env"
    env_file.parent.mkdir()
    env_file.write_text(text)
    return workspace, env_file


@PROVIDERS
async def test_the_env_file_s_keys_are_the_command_s_and_its_values_are_masked_in_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    monkeypatch.setenv("WORKER_TOKEN", "the-worker-keeps-this")
    monkeypatch.setenv("LISTED", "listed-by-env-from")
    workspace, env_file = _setup(tmp_path, f'API_TOKEN="{SECRET}"\nREGION=eu\nLISTED=from-the-file\n')
    sandbox = Sandbox(provider=provider, env_file=str(env_file), env_from=["LISTED"])
    log = tmp_path / "command.log"
    command = 'echo "token=$API_TOKEN region=$REGION listed=$LISTED worker=${WORKER_TOKEN:-unset}"'
    ended = await run_sandboxed(
        SandboxRun(command, workspace, {"LISTED": "listed-by-env-from"}, QUICK, sandbox, log)
    )
    assert ended.outcome is Outcome.PASSED, ended.reason
    said = "token=*** region=eu listed=listed-by-env-from worker=unset"
    assert ended.tail == said  # the worker's own variable stays out; env_from wins a clash
    assert log.read_text() == said + "\n"  # what gets stored is masked too


async def test_the_file_is_read_when_each_command_starts(tmp_path: Path) -> None:
    workspace, env_file = _setup(tmp_path, "STAGE=first\n")
    sandbox = Sandbox(env_file=str(env_file))
    first = await run_sandboxed(SandboxRun("echo $STAGE", workspace, {}, QUICK, sandbox, tmp_path / "1.log"))
    env_file.write_text("STAGE=second\n")
    second = await run_sandboxed(SandboxRun("echo $STAGE", workspace, {}, QUICK, sandbox, tmp_path / "2.log"))
    assert (first.tail, second.tail) == ("first", "second")


@PROVIDERS
async def test_a_missing_env_file_stops_the_command_before_it_starts(tmp_path: Path, provider: str) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    marker = workspace / "ran"
    sandbox = Sandbox(provider=provider, env_file=str(tmp_path / "gone.env"))
    ended = await run_sandboxed(
        SandboxRun(f"touch {marker}", workspace, {}, QUICK, sandbox, tmp_path / "log")
    )
    assert ended.outcome is Outcome.ABNORMAL
    assert ended.reason == (
        f"could not start: the sandbox's env_file {tmp_path / 'gone.env'} does not exist on this worker"
    )
    assert not marker.exists()


async def test_no_process_s_command_line_holds_a_value(tmp_path: Path) -> None:
    workspace, env_file = _setup(tmp_path, f"API_TOKEN={SECRET}\n")
    sandbox = Sandbox(env_file=str(env_file))
    log = tmp_path / "command.log"
    running = asyncio.create_task(
        run_sandboxed(SandboxRun("touch started; sleep 3", workspace, {}, QUICK, sandbox, log))
    )
    for _ in range(100):  # until the command runs inside its sandbox
        await asyncio.sleep(0.05)
        if (workspace / "started").exists():
            break
    lines = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
    ended = await running
    assert ended.outcome is Outcome.PASSED, ended.reason
    assert any("sleep 3" in line for line in lines)  # the listing did see the command
    assert not any(SECRET in line for line in lines)
