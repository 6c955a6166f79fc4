"""Jest's `--json` and Vitest's `--reporter=json` results (the same shape), printed or
written with `--outputFile`.

A failing test is `file::full name` (`src/calc.test.js::calc mean averages`), the file
relative to the workspace so ids stay the same wherever it is checked out; a file that
failed to run at all (a syntax error) is named by itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

from activities.loops.runners.reading import Reading

_OBJECT_START = re.compile(r"^\{", re.MULTILINE)
_RAN = {"passed", "failed"}


def _results(text: str) -> list[dict[str, Any]]:
    """Every JSON object in `text` (starting a line) that is a Jest/Vitest result."""
    decoder = json.JSONDecoder()
    found = []
    for match in _OBJECT_START.finditer(text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("testResults"), list):
            found.append(value)
    return found


def _relative(path: str, root: str) -> str:
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if root and path.startswith(prefix) else path


def read(text: str, root: str = "") -> Reading | None:
    results = _results(text)
    if not results:
        return None
    failing: set[str] = set()
    ran = 0
    for result in results:
        for suite in result["testResults"]:
            if not isinstance(suite, dict):
                continue
            file = _relative(str(suite.get("name", "")), root)
            cases = [case for case in suite.get("assertionResults") or [] if isinstance(case, dict)]
            ran += sum(1 for case in cases if case.get("status") in _RAN)
            failed = {
                f"{file}::{case.get('fullName', '')}" for case in cases if case.get("status") == "failed"
            }
            if suite.get("status") == "failed" and not failed:
                failed = {file}  # the file did not run
            failing |= failed
    return Reading(frozenset(failing), ran)
