"""The sandboxed command runner, with real bubblewrap and real processes: how a command ended,
what it could see and touch, and that nothing of it outlives the run."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import psutil
import pytest

from activities.loops.run_record import TRUNCATED_MARK
from activities.loops.sandbox import (
    Progress,
    RunOutcome,
    SandboxRun,
    SandboxUnavailable,
    run_sandboxed,
    sandbox_problem,
)
from workflows.loop_types import Limits, Outcome, Sandbox

BUBBLEWRAP = Sandbox()
UNCONFINED = Sandbox(provider="none")
PROVIDERS = pytest.mark.parametrize("sandbox", [BUBBLEWRAP, UNCONFINED], ids=["bubblewrap", "none"])
QUICK = Limits(command_timeout_s=20, stall_timeout_s=10)
OUTSIDE_FILE = Path("/etc/openloop-sandbox-test")


async def run(
    tmp_path: Path,
    command: str,
    limits: Limits = QUICK,
    sandbox: Sandbox = BUBBLEWRAP,
    env: dict[str, str] | None = None,
) -> RunOutcome:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return await run_sandboxed(
        SandboxRun(command, workspace, env or {}, limits, sandbox, tmp_path / "logs" / "command.log")
    )


def test_bubblewrap_can_make_a_sandbox_here() -> None:
    assert sandbox_problem() is None


@PROVIDERS
async def test_exit_codes_and_merged_output(tmp_path: Path, sandbox: Sandbox) -> None:
    failed = await run(tmp_path, "echo to-stdout; echo to-stderr >&2; exit 3", sandbox=sandbox)
    assert (failed.outcome, failed.exit_code, failed.reason) == (Outcome.FAILED, 3, "exit code 3")
    assert failed.tail == "to-stdout\nto-stderr"
    assert (tmp_path / "logs" / "command.log").read_text() == "to-stdout\nto-stderr\n"
    assert failed.output_bytes == len("to-stdout\nto-stderr\n")
    assert failed.sandboxed is (sandbox is BUBBLEWRAP)

    passed = await run(tmp_path, "python -c 'print(6 * 7)'", sandbox=sandbox)
    assert (passed.outcome, passed.exit_code, passed.tail) == (Outcome.PASSED, 0, "42")


async def test_a_crash_is_abnormal_and_named(tmp_path: Path) -> None:
    crashed = await run(tmp_path, "kill -SEGV $$")
    assert crashed.outcome is Outcome.ABNORMAL
    assert "SIGSEGV" in crashed.reason


@PROVIDERS
async def test_a_silent_command_is_stopped_as_stalled(tmp_path: Path, sandbox: Sandbox) -> None:
    limits = Limits(command_timeout_s=20, stall_timeout_s=0.4)
    stalled = await run(tmp_path, "echo started; sleep 30", limits, sandbox)
    assert stalled.outcome is Outcome.STALLED
    assert stalled.reason == "no output for 0.4 s"
    assert stalled.exit_code is None
    assert stalled.tail == "started"
    assert stalled.duration_s < 3


async def test_a_command_past_its_time_is_stopped_even_while_printing(tmp_path: Path) -> None:
    limits = Limits(command_timeout_s=0.6, stall_timeout_s=10)
    timed_out = await run(tmp_path, "while true; do echo tick; sleep 0.05; done", limits)
    assert timed_out.outcome is Outcome.TIMED_OUT
    assert "0.6 s" in timed_out.reason
    assert timed_out.tail.endswith("tick")
    assert timed_out.duration_s < 3


async def test_a_command_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    limits = Limits(command_timeout_s=20, stall_timeout_s=0.3)
    stalled = await run(tmp_path, "trap '' TERM; sleep 30", limits)
    assert stalled.outcome is Outcome.STALLED
    assert stalled.duration_s < 5


@PROVIDERS
async def test_a_command_over_its_memory_limit_is_out_of_memory(tmp_path: Path, sandbox: Sandbox) -> None:
    limits = Limits(command_timeout_s=20, stall_timeout_s=10, memory_mb=64)
    hog = "python -c \"import time; kept = b'x' * (200 << 20); time.sleep(30)\""
    result = await run(tmp_path, hog, limits, sandbox)
    assert result.outcome is Outcome.OUT_OF_MEMORY
    assert result.reason.endswith("MB, over the 64 MB limit")
    assert result.duration_s < 5


async def test_too_many_processes_are_stopped(tmp_path: Path) -> None:
    limits = Limits(command_timeout_s=20, stall_timeout_s=10, max_processes=10)
    result = await run(tmp_path, "for i in $(seq 30); do sleep 30 & done; wait", limits)
    assert result.outcome is Outcome.ABNORMAL
    assert result.reason == "reached the limit of 10 processes: the kernel refused a fork"


@PROVIDERS
async def test_only_the_given_variables_are_visible(
    tmp_path: Path, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "secret")
    result = await run(tmp_path, "env", sandbox=sandbox, env={"LOOP_ROUND": "3"})
    assert "LOOP_ROUND=3" in result.tail.splitlines()
    assert "HOME=/tmp" in result.tail.splitlines()
    assert "GITHUB_TOKEN" not in result.tail
    assert "secret" not in result.tail


async def test_nothing_outside_the_workspace_is_writable(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"  # not visible in the sandbox at all
    shown = tmp_path / "shown"  # visible read-only
    for host_dir in (hidden, shown):
        host_dir.mkdir()
        (host_dir / "file").write_text("original")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "to-hidden").symlink_to(hidden)
    (workspace / "to-shown").symlink_to(shown)
    attempts = [
        f"mount -o remount,bind,rw {shown}",  # needs capabilities the command must not have
        "echo changed > to-hidden/file",
        "echo new > to-hidden/new",
        "echo changed > to-shown/file",
        "echo new > to-shown/new",
        f"echo new > {OUTSIDE_FILE}",
        f"echo new > {tmp_path}/logs/escaped",
        "echo mine > made-inside",
    ]
    sandbox = Sandbox(read_only=[str(shown)])
    result = await run(tmp_path, "; ".join(attempts) + "; cat to-shown/file", sandbox=sandbox)

    assert result.tail.endswith("original")  # read-only paths are readable
    assert result.tail.count("Read-only file system") >= 3
    for host_dir in (hidden, shown):
        assert _names(host_dir) == ["file"]
        assert (host_dir / "file").read_text() == "original"
    assert OUTSIDE_FILE.name not in _names(OUTSIDE_FILE.parent)
    assert _names(tmp_path / "logs") == ["command.log"]
    assert (workspace / "made-inside").read_text() == "mine\n"


def _names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


@pytest.mark.parametrize("network", [False, True])
async def test_network_only_when_the_loop_asks(tmp_path: Path, network: bool) -> None:
    connected = asyncio.Event()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connect = f"python -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\""
    async with server:
        result = await run(tmp_path, connect, sandbox=Sandbox(network=network))
    # With the host's network shared, 127.0.0.1 inside is the host's.
    assert result.outcome is (Outcome.PASSED if network else Outcome.FAILED)
    assert connected.is_set() is network


async def test_long_output_keeps_its_last_kilobytes(tmp_path: Path) -> None:
    limits = Limits(command_timeout_s=20, stall_timeout_s=10, output_kb=1)
    result = await run(tmp_path, "seq 1 20000", limits)
    everything = "".join(f"{number}\n" for number in range(1, 20001))
    assert result.output_bytes == len(everything)
    kept = (tmp_path / "logs" / "command.log").read_bytes()
    assert kept.startswith(TRUNCATED_MARK)
    assert len(kept) <= len(TRUNCATED_MARK) + 1024
    numbers = [int(line) for line in kept[len(TRUNCATED_MARK) :].decode().splitlines()]
    assert numbers == list(range(numbers[0], 20001))  # whole lines only, none missing at the end
    assert result.tail.splitlines()[-1] == "20000"
    assert len(result.tail.splitlines()) == 60


@PROVIDERS
async def test_a_cancelled_run_leaves_no_process(tmp_path: Path, sandbox: Sandbox) -> None:
    seconds = f"{random.randint(100, 999)}.{random.randint(100, 999)}"  # names our sleep
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    sleep = SandboxRun(f"sleep {seconds}; echo", workspace, {}, QUICK, sandbox, tmp_path / "command.log")
    running = asyncio.create_task(run_sandboxed(sleep))
    for _ in range(100):
        if _sleeping(seconds):
            break
        await asyncio.sleep(0.05)
    assert _sleeping(seconds)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert not _sleeping(seconds)


def _sleeping(seconds: str) -> bool:
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["cmdline"] == ["sleep", seconds] and process.info["status"] != psutil.STATUS_ZOMBIE:
            return True
    return False


async def test_progress_is_reported_while_it_runs(tmp_path: Path) -> None:
    reports: list[Progress] = []
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    ticking = SandboxRun(
        "for i in $(seq 8); do echo tick; sleep 0.1; done", workspace, {}, QUICK, BUBBLEWRAP, tmp_path / "log"
    )
    result = await run_sandboxed(ticking, reports.append, progress_every_s=0.2)
    assert result.outcome is Outcome.PASSED
    assert len(reports) >= 2
    assert all(report.pid > 0 for report in reports)
    assert [report.elapsed_s for report in reports] == sorted(report.elapsed_s for report in reports)
    assert reports[-1].output_bytes > 0
    assert any(report.bytes_per_s > 0 for report in reports)


async def test_without_bubblewrap_nothing_runs_unconfined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        await run(tmp_path, "touch ran")
    assert not (tmp_path / "workspace" / "ran").exists()


async def test_a_missing_workspace_cannot_start(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    result = await run_sandboxed(SandboxRun("true", missing, {}, QUICK, BUBBLEWRAP, tmp_path / "log"))
    assert result.outcome is Outcome.ABNORMAL
    assert result.reason == f"could not start: {missing} does not exist"
