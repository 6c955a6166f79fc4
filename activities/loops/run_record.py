"""How a finished sandboxed command is reported: its `RunOutcome`, the output log (cut to size)
whose tail the outcome quotes, and the verdict read from the command's exit status."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

from workflows.egress_report import EgressReport
from workflows.loop_types import Outcome

__all__ = ["TAIL_BYTES", "TAIL_LINES", "TRUNCATED_MARK", "OutputLog", "RunOutcome", "judge_exit"]

TAIL_LINES = 60
TAIL_BYTES = 4096
TRUNCATED_MARK = b"[... earlier output dropped ...]\n"


@dataclass(frozen=True)
class RunOutcome:
    outcome: Outcome
    exit_code: int | None  # None when it was killed or never started
    duration_s: float
    output_bytes: int  # everything the command printed, kept or not
    tail: str  # its last lines
    reason: str  # why, in words, when it did not simply pass
    sandboxed: bool
    egress: EgressReport | None = None  # with a network allowlist: what its proxies saw


class OutputLog:
    """The command's output file. Past twice the kept size it is cut back to the last `keep`
    bytes, so a chatty command cannot fill the disk; a cut file starts with TRUNCATED_MARK."""

    def __init__(self, path: Path, keep_kb: int):
        self.path = path
        self.keep = max(1, keep_kb) * 1024
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("wb")
        self._kept_bytes = 0  # of the command's output in the file, not counting the mark
        self._last = bytearray()

    def write(self, chunk: bytes) -> None:
        self._file.write(chunk)
        self._kept_bytes += len(chunk)
        self._last = (self._last + chunk)[-2 * TAIL_BYTES :]
        if self._kept_bytes > 2 * self.keep:
            self._cut()

    def close(self) -> None:
        if self._kept_bytes > self.keep:
            self._cut()
        self._file.close()

    def tail(self) -> str:
        lines = bytes(self._last).decode(errors="replace").splitlines()[-TAIL_LINES:]
        return "\n".join(lines)[-TAIL_BYTES:]

    def _cut(self) -> None:
        self._file.close()
        with self.path.open("rb") as old:
            old.seek(-self.keep, os.SEEK_END)
            kept = old.read()
        newline = kept.find(b"\n")
        if 0 <= newline < len(kept) - 1:  # the first line is likely partial
            kept = kept[newline + 1 :]
        cut_path = self.path.with_name(self.path.name + ".cut")
        cut_path.write_bytes(TRUNCATED_MARK + kept)
        os.replace(cut_path, self.path)
        self._file = self.path.open("ab")
        self._kept_bytes = len(kept)


def judge_exit(returncode: int) -> tuple[Outcome, int | None, str]:
    """The shell (and bwrap) report a child killed by signal N as exit code 128+N."""
    if returncode == 0:
        return Outcome.PASSED, 0, ""
    signal_number = -returncode if returncode < 0 else returncode - 128
    exit_code = None if returncode < 0 else returncode
    if not 0 < signal_number < 32:
        return Outcome.FAILED, returncode, f"exit code {returncode}"
    if signal_number == signal.SIGXFSZ:
        return Outcome.ABNORMAL, exit_code, "wrote a file past the size limit (SIGXFSZ)"
    name = signal.Signals(signal_number).name
    reason = f"killed by {name}" + (
        " (perhaps the kernel's out-of-memory killer)" if name == "SIGKILL" else ""
    )
    return Outcome.ABNORMAL, exit_code, reason


# What shells and runtimes print when the kernel refuses a fork (RLIMIT_NPROC: EAGAIN).
_FORK_REFUSED = (
    "cannot fork",
    "can't fork",
    "fork: resource temporarily unavailable",
    "fork: retry: resource temporarily unavailable",
    "blockingioerror: [errno 11]",
)


def judge_fork_refusal(outcome: Outcome, tail: str, max_processes: int) -> str | None:
    """Why a failed command failed when it ran into the process limit, else None."""
    if outcome is not Outcome.FAILED or not any(sign in tail.lower() for sign in _FORK_REFUSED):
        return None
    return f"reached the limit of {max_processes} processes: the kernel refused a fork"
