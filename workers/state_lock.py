"""One `openloop up` per state folder: a lock held for the life of the stack.

Two stacks on one state folder would share the Temporal database file and the Postgres data,
and the one stopped first would delete the other's `stack.json`, leaving it unreachable from
the CLI. `up` takes an exclusive `flock` on `<state dir>/up.lock` before it starts anything
and holds it until every part has stopped; the kernel releases it when the process ends,
however it ends, so a lock is never stale. The holder writes who it is into the file; a second
`up` reads that (and the holder's `stack.json`, for its ports) to say which process holds it,
and stops without touching anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from config.settings import STACK_FILE

LOCK_FILE = "up.lock"


class StateDirBusy(RuntimeError):
    """Another `openloop up` holds the state folder."""


@contextlib.contextmanager
def hold_state_dir(state_dir: Path, ports: dict[str, str]) -> Iterator[None]:
    """Hold the state folder's lock while the block runs; `StateDirBusy` if another process
    holds it. `ports`: where this stack will listen, written for a second `up` to read."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateDirBusy(_busy(state_dir, _read(fd))) from None
        record = {"pid": os.getpid(), "started_at": datetime.now().astimezone().isoformat(), **ports}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _read(fd: int) -> dict[str, object]:
    try:
        found = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:  # the holder is between truncating and writing
        return {}
    return found if isinstance(found, dict) else {}


def _busy(state_dir: Path, holder: dict[str, object]) -> str:
    pid = holder.get("pid")
    who = f"process {pid}" if pid else "another process"
    started = str(holder.get("started_at") or "")
    when = f", started {started[:19].replace('T', ' ')}" if started else ""
    ports = _ports(state_dir, holder)
    stop = f"stop it first (Ctrl-C where it runs, or `kill {pid}`)" if pid else "stop it first"
    return (
        f"the state folder {state_dir} is in use by another `openloop up` ({who}{when}{ports}): "
        f"{stop}, or give this one a folder of its own with OPENLOOP_STATE_DIR"
    )


def _ports(state_dir: Path, holder: dict[str, object]) -> str:
    """Where the holder serves: its stack.json once it is up, else what it asked for."""
    try:
        stack = json.loads((state_dir / STACK_FILE).read_text())
    except (OSError, ValueError):
        stack = {}
    if not isinstance(stack, dict):
        stack = {}
    shown = [
        f"{label} {value}"
        for label, key in (("Temporal", "temporal_address"), ("Web UI", "web_ui"), ("HTTP", "http"))
        if (value := stack.get(key) or holder.get(key))
    ]
    return "; " + ", ".join(shown) if shown else ""
