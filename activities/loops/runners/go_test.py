"""`go test -json` output: one JSON event a line (`go doc cmd/test2json`).

A failing test is `package::TestName` (a subtest `package::TestName/case`); a package that
fails with no failing test of its own (it did not build, or `TestMain` failed) is named by
itself. Tests that ran are those that passed or failed; skipped ones did not.
"""

from __future__ import annotations

import json
from typing import Any

from activities.loops.runners.reading import Reading

_ACTIONS = {"start", "run", "pause", "cont", "pass", "bench", "fail", "output", "skip"}


def _events(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        if not line.startswith('{"'):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(event, dict)
            and event.get("Action") in _ACTIONS
            and isinstance(event.get("Package"), str)
        ):
            events.append(event)
    return events


def read(text: str) -> Reading | None:
    events = _events(text)
    if not events:
        return None
    failing: set[str] = set()
    failed_packages: list[str] = []
    ran = 0
    for event in events:
        test, package, action = event.get("Test"), event["Package"], event["Action"]
        if action in ("pass", "fail") and test:
            ran += 1
        if action == "fail":
            if test:
                failing.add(f"{package}::{test}")
            else:
                failed_packages.append(package)
    failing |= {p for p in failed_packages if not any(f.startswith(f"{p}::") for f in failing)}
    finished = any(event["Action"] in ("pass", "fail", "skip") and not event.get("Test") for event in events)
    return Reading(frozenset(failing), ran, finished)
