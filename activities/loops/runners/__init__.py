"""Test runners' output other than pytest's, one module per family: which tests failed and
how many ran, from `python -m unittest` (with or without `-v`), `go test -json`, Jest's
`--json` and Vitest's `--reporter=json` results, `cargo test`, and JUnit XML reports.

Each family's `read` returns a `Reading`, or None when the text is not that runner's output.
Pure text work: a report file reaches these only as text the caller read.
"""

from __future__ import annotations

from activities.loops.runners import cargo_test, go_test, jest_json, python_unittest
from activities.loops.runners.reading import Reading

__all__ = ["Reading", "read_runners"]


def read_runners(text: str, reports: list[str], root: str = "") -> Reading | None:
    """What every runner family found in `text` and in the JSON `reports` a command wrote;
    None when none of them recognised anything."""
    found = [
        python_unittest.read(text),
        go_test.read(text),
        jest_json.read(text, root),
        cargo_test.read(text),
    ]
    found += [jest_json.read(report, root) for report in reports]
    return Reading.merged([reading for reading in found if reading is not None])
