"""`python -m unittest` output, with or without `-v`.

Ids are what `python -m unittest ID` takes: `module.Class.test_name`. Python 3.11 and later
print `test_name (module.Class.test_name)`, earlier ones `test_name (module.Class)`; both
give the same id. A module that fails to import is named by itself. The `FAIL:`/`ERROR:`
headers are printed with or without `-v` and read first; `-v`'s `... FAIL` lines add those
whose details were cut from a long output.
"""

from __future__ import annotations

import re

from activities.loops.runners.reading import Reading

_HEADER = re.compile(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)(?: \(.*\))?\s*$")
_VERBOSE = re.compile(r"^\s*(\w+) \(([\w.]+)\)(?: \(.*\))? \.\.\. (?:FAIL|ERROR)\s*$")
_VERBOSE_START = re.compile(r"^(\w+) \(([\w.]+)\)\s*$")  # a docstring's line comes next
_ENDS_FAILED = re.compile(r" \.\.\. (?:FAIL|ERROR)\s*$")
_RAN = re.compile(r"^Ran (\d+) tests? in \d+(?:\.\d+)?s\s*$")
_END = re.compile(r"^(?:OK|FAILED|NO TESTS RAN)(?: \((.*)\))?\s*$")
_SKIPPED = re.compile(r"\bskipped=(\d+)")
_IMPORT_FAILED = "unittest.loader._FailedTest"


def test_id(name: str, where: str) -> str:
    """`test_x` in `mod.Class` or `mod.Class.test_x` -> `mod.Class.test_x`."""
    if where.startswith(_IMPORT_FAILED):
        return name  # the module that did not import
    return where if where.endswith(f".{name}") else f"{where}.{name}"


def _ran(lines: list[str]) -> tuple[bool, int | None]:
    """Whether unittest printed its summary, and how many tests ran (skipped ones did not)."""
    for index, line in enumerate(lines):
        ran = _RAN.match(line)
        if ran is None:
            continue
        end = next((m for m in map(_END.match, lines[index + 1 : index + 4]) if m), None)
        if end is not None:
            skipped = _SKIPPED.search(end.group(1) or "")
            return True, int(ran.group(1)) - (int(skipped.group(1)) if skipped else 0)
    return False, None


def read(text: str) -> Reading | None:
    lines = text.splitlines()
    failing: set[str] = set()
    for index, line in enumerate(lines):
        match = _HEADER.match(line) or _VERBOSE.match(line)
        if match is None and (start := _VERBOSE_START.match(line)) and index + 1 < len(lines):
            match = start if _ENDS_FAILED.search(lines[index + 1]) else None
        if match is not None:
            failing.add(test_id(match.group(1), match.group(2)))
    finished, ran = _ran(lines)
    if not finished and not failing:
        return None
    return Reading(frozenset(failing), ran, finished)
