"""`cargo test` output: `test name ... ok|FAILED|ignored` lines and `test result:` summaries.

A failing test is `target::path::name` (`src/lib.rs::tests::it_means`, `tests/api.rs::x`),
the target from cargo's `Running` line, so equal names in two test binaries stay apart. A
doc test keeps rustdoc's name without its line number (`src/lib.rs - mean`), which moves
whenever code above it does.
"""

from __future__ import annotations

import re

from activities.loops.runners.reading import Reading

_RESULT = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored\b.*|bench:.*)\s*$")
_STDOUT = re.compile(r"^---- (.+?) stdout ----\s*$")
_SUMMARY = re.compile(r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; \d+ ignored;")
_RUNNING = re.compile(r"^\s+Running (?:unittests )?(\S+)(?: \(.*\))?\s*$")
_DOC_TESTS = re.compile(r"^\s+Doc-tests \S+\s*$")
_DOC_LINE = re.compile(r" \(line \d+\)$")
_HASH = re.compile(r"-[0-9a-f]{16}$")  # old cargo names the binary: target/debug/deps/calc-<hash>


def _name(target: str, name: str) -> str:
    if _DOC_LINE.search(name):
        return _DOC_LINE.sub("", name)
    return f"{target}::{name}" if target else name


def read(text: str) -> Reading | None:
    target, failing, ran, seen = "", set[str](), 0, False
    finished = successes = False
    for line in text.splitlines():
        if line in ("successes:", "failures:"):
            successes = line == "successes:"  # `--show-output` prints passing tests' output too
        elif running := _RUNNING.match(line):
            target, successes = _HASH.sub("", running.group(1)), False
        elif _DOC_TESTS.match(line):
            target = ""
        elif result := _RESULT.match(line):
            seen = True
            if result.group(2) == "FAILED":
                failing.add(_name(target, result.group(1)))
        elif (stdout := _STDOUT.match(line)) and not successes:
            failing.add(_name(target, stdout.group(1)))
        elif summary := _SUMMARY.match(line):
            finished = True
            ran += int(summary.group(1)) + int(summary.group(2))
    if not seen and not finished:
        return None
    return Reading(frozenset(failing), ran if finished else None, finished)
