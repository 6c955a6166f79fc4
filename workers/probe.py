"""Readiness and liveness of the worker process, as files a container probe can check.

The worker has no HTTP port, so it reports through two files:

- `<ready file>`: present while the worker is polling and Temporal answers its health
  check, refreshed every few seconds; removed as soon as shutdown begins.
- `<ready file>.alive`: refreshed by the same loop whatever Temporal says, so a stale file
  means the process is wedged, not that the cluster is down.

`python -m workers.probe FILE MAX_AGE_SECONDS` exits 0 when FILE exists and was refreshed
within MAX_AGE_SECONDS (the Kubernetes exec probes and the compose healthcheck use it).
This module imports nothing heavy: probes run it every few seconds.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

REFRESH_SECONDS = 5.0


class ReadinessFiles:
    """Writes and clears the ready/alive files; a no-op without a path."""

    def __init__(self, ready_file: Path | None) -> None:
        self.ready_file = ready_file
        self.alive_file = ready_file.with_name(ready_file.name + ".alive") if ready_file else None

    def beat(self, *, ready: bool) -> None:
        if self.ready_file is None or self.alive_file is None:
            return
        self.ready_file.parent.mkdir(parents=True, exist_ok=True)
        _touch(self.alive_file)
        if ready:
            _touch(self.ready_file)
        else:
            self.clear_ready()

    def clear_ready(self) -> None:
        if self.ready_file is not None:
            with contextlib.suppress(FileNotFoundError):
                self.ready_file.unlink()

    def clear(self) -> None:
        self.clear_ready()
        if self.alive_file is not None:
            with contextlib.suppress(FileNotFoundError):
                self.alive_file.unlink()


def _touch(path: Path) -> None:
    path.touch()  # sets the mtime to now when the file exists


def fresh(path: Path, max_age_seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime <= max_age_seconds
    except FileNotFoundError:
        return False


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m workers.probe FILE MAX_AGE_SECONDS", file=sys.stderr)
        return 2
    path, max_age = Path(argv[0]), float(argv[1])
    if fresh(path, max_age):
        return 0
    print(f"{path}: missing or older than {max_age:g}s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
