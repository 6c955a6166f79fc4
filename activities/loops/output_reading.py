"""What a loop command's output says: which tests fail, how many ran, the baseline metric, and
the part of a failure worth handing to the next round's fixer as `{last_error}`.

Reads pytest's terminal output (the short summary, `-v` lines, collection errors, the final
counts line) here, and JUnit XML reports and other runners' output (unittest, go test -json,
Jest/Vitest JSON, cargo test) through `activities.loops.runners`. A report is read only
through the caller's `read_file`, which must keep to the workspace. No other I/O here.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Iterable

from activities.loops.runners import Reading, read_runners
from activities.loops.runners.junit import MAX_REPORT_CHARS, junit_failures, junit_ran

__all__ = ["MAX_REPORT_CHARS", "failing_tests", "last_error", "metric", "ran_count"]

ReadFile = Callable[[str], str | None]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SUMMARY_ENTRY = re.compile(r"^(?:FAILED|ERROR) (\S.*)$")
_VERBOSE_LINE = re.compile(r"^(\S.*?::.*?) (?:FAILED|ERROR)(?: +\[\s*\d+%\])?\s*$")
_XDIST_LINE = re.compile(r"^\[gw\d+\] \[\s*\d+%\] (?:FAILED|ERROR) (\S.*?)\s*$")
_COUNTS_LINE = re.compile(
    r"^=*\s*(?P<counts>\d+ [a-z]+(?:, \d+ [a-z]+)*|no tests ran)"
    r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?\s*=*$"
)
_COUNT = re.compile(r"(\d+) ([a-z]+)")
_COUNT_WORDS = {"passed", "failed", "error", "errors", "skipped", "deselected", "xfailed", "xpassed"}
_COUNT_WORDS |= {"warning", "warnings", "rerun"}
_FAILED_WORDS = {"failed", "error", "errors"}
_RAN_WORDS = _FAILED_WORDS | {"passed", "xfailed", "xpassed"}  # not skipped, not deselected
_SESSION_START = re.compile(r"^=+ test session starts =+$")
_SHORT_SUMMARY = re.compile(r"^=+ short test summary info =+$")
_REPORT_LINE = re.compile(r"generated xml file: (.+?)(?: -+)?\s*$")


def _clean(text: str) -> str:
    return _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


def _node_id(text: str) -> str:
    """The pytest node id at the start of `text`: up to the first space outside brackets, so
    `test_x[a b-1] - assert ...` keeps its parameters."""
    depth = 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif char == " " and depth == 0:
            return text[:index]
    return text.rstrip()


def _is_node_id(node_id: str, pytest_run: bool) -> bool:
    """A test (`path::name`) anywhere, or a bare file (a collection error) in a pytest run."""
    path = node_id.split("::", 1)[0]
    if not path or any(char.isspace() for char in path) or "." not in path:
        return False
    return "::" in node_id or pytest_run


def _option_values(command: str, options: tuple[str, ...]) -> list[str]:
    """The values `command` gives `options` (`--opt=V` or `--opt V`)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = []
    values = []
    for index, word in enumerate(words):
        for option in options:
            if word.startswith(option + "="):
                values.append(word.split("=", 1)[1])
            elif word == option and index + 1 < len(words):
                values.append(words[index + 1])
    return values


def _report_paths(lines: Iterable[str], command: str) -> list[str]:
    paths = [match.group(1) for line in lines if (match := _REPORT_LINE.search(line))]
    return list(dict.fromkeys(paths + _option_values(command, ("--junitxml", "--junit-xml"))))


def _read_reports(paths: list[str], read_file: ReadFile) -> list[str]:
    texts = []
    for path in paths:
        try:
            text = read_file(path)
        except (OSError, ValueError):
            text = None
        if text is not None:
            texts.append(text)
    return texts


def _report_failures(texts: list[str]) -> set[str] | None:
    found: set[str] | None = None
    for failing in (junit_failures(text) for text in texts):
        if failing is not None:
            found = (found or set()) | failing
    return found


def _counts(lines: list[str]) -> tuple[bool, list[tuple[int, str]]]:
    """Whether pytest printed its final counts line, and the counts it printed."""
    counted: list[tuple[int, str]] = []
    finished = False
    for line in lines:
        match = _COUNTS_LINE.match(line.strip())
        found = _COUNT.findall(match.group("counts")) if match else []
        pairs = [(int(number), word) for number, word in found]
        if match and all(word in _COUNT_WORDS for _, word in pairs):
            finished = True
            counted += pairs
    return finished, counted


def ran_count(
    output: str, read_file: ReadFile | None = None, *, command: str = "", root: str = ""
) -> int | None:
    """How many tests ran (passed, failed, errored, xfailed, xpassed; skipped and deselected
    ones did not): from pytest's final counts line, else from the JUnit reports `failing_tests`
    reads, else from another runner's output; None when none says. A test that stops failing
    because it no longer runs is told apart from a fixed one by this count."""
    lines = _clean(output).splitlines()
    finished, counted = _counts(lines)
    if finished:
        return sum(number for number, word in counted if word in _RAN_WORDS)
    if read_file is not None:
        ran = [junit_ran(text) for text in _read_reports(_report_paths(lines, command), read_file)]
        known = [number for number in ran if number is not None]
        if known:
            return sum(known)
    other = _other_runners(output, read_file, command, root)
    return None if other is None else other.ran


def _other_runners(output: str, read_file: ReadFile | None, command: str, root: str) -> Reading | None:
    """unittest, go test -json, Jest/Vitest JSON (printed, or written to `--outputFile`), cargo."""
    paths = _option_values(command, ("--outputFile", "--outputFile.json"))
    reports = _read_reports(paths, read_file) if read_file is not None and paths else []
    return read_runners(_clean(output), reports, root)


def failing_tests(
    output: str, read_file: ReadFile | None = None, *, command: str = "", root: str = ""
) -> list[str] | None:
    """The sorted failing test ids in a command's output; [] for a test run with no failures,
    None when the output names no tests (or says tests failed without naming them). Output
    that is not pytest's is read by `activities.loops.runners`; `root` is the folder the
    command ran in, for runners that print absolute paths.

    A JUnit report named in the output (pytest's `generated xml file: PATH`, printed unless
    `-q`) or by `--junitxml` in `command` is read through `read_file` and, when it parses,
    is the answer: it lists every test even when the output was cut short.
    """
    lines = _clean(output).splitlines()
    finished, counted = _counts(lines)  # pytest printed its final counts line
    pytest_run = finished or any(_SESSION_START.match(line) or _SHORT_SUMMARY.match(line) for line in lines)
    if read_file is not None and finished:
        from_reports = _report_failures(_read_reports(_report_paths(lines, command), read_file))
        if from_reports is not None:
            return sorted(from_reports)
    failing: set[str] = set()
    for line in lines:
        match = _SUMMARY_ENTRY.match(line) or _XDIST_LINE.match(line)
        node_id = _node_id(match.group(1)) if match else None
        if node_id is None and (verbose := _VERBOSE_LINE.match(line)):
            node_id = verbose.group(1)
        if node_id is not None and _is_node_id(node_id, pytest_run):
            failing.add(node_id)
    if failing:
        return sorted(failing)
    if any(number and word in _FAILED_WORDS for number, word in counted):
        return None
    if finished:
        return []
    other = _other_runners(output, read_file, command, root)
    if other is None or not (other.failing or other.finished):
        return None
    return sorted(other.failing)


def metric(output: str, regex: str) -> float | None:
    """The baseline metric: the last match's first group (or the whole match) as a number,
    with thousands commas and a percent sign allowed; None when nothing matches."""
    matches = list(re.finditer(regex, _clean(output), re.MULTILINE))
    if not matches:
        return None
    last = matches[-1]
    text = last.group(1) if last.re.groups and last.group(1) is not None else last.group(0)
    try:
        value = float(text.replace(",", "").replace("%", "").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _fitting(lines: list[str], limit: int) -> list[str]:
    """The most lines from the start of `lines` whose text fits in `limit` characters."""
    kept: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if size > limit:
            break
        kept.append(line)
    return kept


def last_error(output_tail: str, limit: int = 2000) -> str:
    """The useful end of a failed command's output, at most `limit` characters: pytest's
    short test summary when there is one (as many entries as fit, and the counts), else the
    last lines."""
    lines = _clean(output_tail).rstrip().splitlines()
    starts = [index for index, line in enumerate(lines) if _SHORT_SUMMARY.match(line)]
    if starts:
        section = lines[starts[-1] + 1 :]
        ends = [index for index, line in enumerate(section) if _COUNTS_LINE.match(line.strip())]
        section = section[: ends[0] + 1] if ends else section  # not the warnings printed after
        if len("\n".join(section)) <= limit:
            return "\n".join(section)
        final = section[-1][:limit]
        marker = "..."
        kept = _fitting(section[:-1], limit - len(final) - len(marker) - 2)
        return "\n".join([*kept, marker, final])[:limit]
    kept = list(reversed(_fitting(list(reversed(lines)), limit)))
    if kept:
        return "\n".join(kept)
    return lines[-1][-limit:] if lines else ""
