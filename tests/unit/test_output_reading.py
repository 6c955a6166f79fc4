"""Reading failing tests, a metric and the last error out of real pytest runs' output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from activities.loops.output_reading import MAX_REPORT_CHARS, failing_tests, last_error, metric, ran_count

TESTS = """
import pytest
from calc import add

def test_add():
    assert add(1, 2) == 3

def test_zero():
    assert add(0, 0) == 1

@pytest.mark.parametrize("a,b", [(1, 2), ("x y", "z - w")])
def test_param(a, b):
    assert a == b

class TestCalc:
    def test_method(self):
        assert add(1, 1) == 2

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_fixture(broken):
    pass
"""

IN_CALC = {
    "tests/test_calc.py::TestCalc::test_method",
    "tests/test_calc.py::test_add",
    "tests/test_calc.py::test_fixture",
    "tests/test_calc.py::test_param[1-2]",
    "tests/test_calc.py::test_param[x y-z - w]",
}
FAILING = sorted(IN_CALC | {"tests/test_broken.py"})


def _run(project: Path, *args: str) -> str:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--continue-on-collection-errors"]
    done = subprocess.run(
        [*command, *args],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, as a loop command's output is kept
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},  # this project uses none
    )
    return done.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One small project with every kind of failure, run the ways a loop's verify might."""
    project = tmp_path_factory.mktemp("project")
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "calc.py").write_text("def add(a, b):\n    return a + b + 1\n")
    (project / "tests").mkdir()
    (project / "tests" / "__init__.py").write_text("")
    (project / "tests" / "test_calc.py").write_text(TESTS)
    (project / "tests" / "test_broken.py").write_text("import nonexistent_module\n")
    outputs = {
        "quiet": _run(project, "-q"),
        "verbose_xml": _run(project, "-v", "--junitxml=report.xml"),
        "xunit1_color": _run(project, "-q", "--color=yes", "-o", "junit_family=xunit1", "--junitxml=x1.xml"),
        "passing": _run(project, "-q", "tests/test_calc.py", "-k", "zero"),
        "none_ran": _run(project, "-q", "tests/test_calc.py", "-k", "nothing"),
    }
    return project, outputs


def _without(output: str, *starts: str) -> str:
    return "\n".join(line for line in output.splitlines() if not line.startswith(starts))


def _reader(project: Path, asked: list[str]):
    def read(path: str) -> str | None:
        asked.append(path)
        return (project / path).read_text()  # an absolute path replaces the project's

    return read


def test_the_short_summary_names_every_failure_collection_errors_as_their_file(runs) -> None:
    assert failing_tests(runs[1]["quiet"]) == FAILING


def test_verbose_lines_name_failures_without_a_short_summary(runs) -> None:
    output = _without(runs[1]["verbose_xml"], "FAILED ", "ERROR ")
    assert failing_tests(output) == sorted(IN_CALC)  # a collection error has no verbose line


def test_a_junit_report_named_in_the_output_is_read_through_the_callers_reader(runs) -> None:
    project, outputs = runs
    # Cut like a stored tail: only the report line and the counts remain of the failures.
    output = _without(outputs["verbose_xml"], "FAILED ", "ERROR ", "tests/")
    asked: list[str] = []
    assert failing_tests(output, _reader(project, asked)) == FAILING
    assert asked == [str(project / "report.xml")]


def test_a_junit_report_named_by_the_command_is_read_when_quiet_output_does_not_name_it(runs) -> None:
    project, outputs = runs
    output = _without(outputs["xunit1_color"], "FAILED ", "ERROR ")
    asked: list[str] = []
    found = failing_tests(output, _reader(project, asked), command="python -m pytest -q --junitxml=x1.xml")
    assert (asked, found) == (["x1.xml"], FAILING)


def test_colored_output_reads_like_plain_output(runs) -> None:
    assert "\x1b[" in runs[1]["xunit1_color"]
    assert failing_tests(runs[1]["xunit1_color"]) == FAILING


def test_an_unreadable_or_refused_report_falls_back_to_the_output(runs) -> None:
    assert failing_tests(runs[1]["verbose_xml"], lambda path: None) == FAILING

    def refuse(path: str) -> str | None:
        raise PermissionError(path)

    assert failing_tests(runs[1]["verbose_xml"], refuse) == FAILING


def test_a_run_without_failures_has_no_failing_tests(runs) -> None:
    assert "1 passed, 5 deselected in " in runs[1]["passing"]
    assert failing_tests(runs[1]["passing"]) == []
    assert failing_tests(runs[1]["none_ran"]) == []
    assert failing_tests("============ 5 passed in 0.12s ============") == []
    assert failing_tests("===== no tests ran in 0.01s =====") == []


def test_how_many_tests_ran_leaves_out_skipped_and_deselected_ones(runs) -> None:
    project, outputs = runs
    assert ran_count(outputs["quiet"]) == 7  # 4 failed, 1 passed, 2 errors
    assert ran_count(outputs["passing"]) == 1  # 1 passed, 5 deselected
    assert ran_count(outputs["none_ran"]) == 0
    assert ran_count("===== 4 passed, 2 skipped, 1 xfailed in 0.12s =====") == 5
    assert ran_count("make: *** [all] Error 1\n") is None
    # Without pytest's counts line, the JUnit report the command names says.
    asked: list[str] = []
    command = "python -m pytest -q --junitxml=x1.xml"
    assert ran_count("", _reader(project, asked), command=command) == 7 and asked == ["x1.xml"]


@pytest.mark.parametrize(
    "output",
    [
        "",
        "make: *** [all] Error 1\n",
        "ERROR main.py - crashed\n",  # not a pytest run: a bare file is not a test
        "3 files in 0.2s\n",
        "============ 2 failed in 0.12s ============\n",  # failed, but which is not said
    ],
)
def test_output_that_names_no_tests_gives_none(output: str) -> None:
    assert failing_tests(output) is None


def test_other_junit_reports_name_tests_by_classname_and_name(tmp_path: Path) -> None:
    report = (
        '<testsuite name="gradle" tests="2"><testcase classname="com.acme.CalcTest" name="adds">'
        '<failure message="x"/></testcase><testcase classname="com.acme.CalcTest" name="ok"/></testsuite>'
    )
    output = "generated xml file: /w/r.xml\n===== 1 failed, 1 passed in 1.0s =====\n"
    assert failing_tests(output, lambda path: report) == ["com.acme.CalcTest::adds"]


LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>'
    '<testsuite name="pytest"><testcase classname="x" name="&b;"><failure/></testcase></testsuite>'
)


@pytest.mark.parametrize(
    "report", [LAUGHS, '<testsuite name="pytest">' + " " * MAX_REPORT_CHARS + "</testsuite>", "<not xml"]
)
def test_reports_with_entities_of_huge_size_or_broken_are_not_parsed(report: str) -> None:
    output = "generated xml file: /w/r.xml\nFAILED tests/test_a.py::test_a - boom\n1 failed in 0.1s\n"
    assert failing_tests(output, lambda path: report) == ["tests/test_a.py::test_a"]


@pytest.mark.parametrize(
    ("output", "regex", "expected"),
    [
        ("TOTAL    120   12    90%\n", r"TOTAL.* (\d+)%", 90.0),
        ("coverage 80%\nTOTAL 1 1 70%\nTOTAL 1 1 85%\n", r"TOTAL.* (\d+)%", 85.0),  # the last match
        ("requests: 1,234.5/s\n", r"requests: ([\d,.]+)", 1234.5),
        ("score 0.93\n", r"\d+\.\d+", 0.93),  # no group: the whole match
        ("score 93%\n", r"score (\S+)", 93.0),
        ("nothing here\n", r"TOTAL.* (\d+)%", None),
        ("score high\n", r"score (\w+)", None),
    ],
)
def test_metric_is_the_last_match_as_a_number(output: str, regex: str, expected: float | None) -> None:
    assert metric(output, regex) == expected


def test_last_error_is_the_short_summary_of_a_pytest_run(runs) -> None:
    error = last_error(runs[1]["quiet"])
    assert error.startswith("FAILED tests/test_calc.py::test_add - assert 4 == 3")
    assert "ERROR tests/test_broken.py" in error
    assert error.splitlines()[-1].startswith("4 failed, 1 passed, 2 errors in ")
    assert "Traceback" not in error
    # Warnings a plugin prints after the summary are not part of it.
    assert last_error(runs[1]["quiet"] + "DeprecationWarning: soon\n") == error


def test_last_error_keeps_the_counts_when_the_summary_is_too_long(runs) -> None:
    error = last_error(runs[1]["quiet"], limit=120)
    assert len(error) <= 120
    assert error.splitlines()[0].startswith("FAILED ")
    assert error.splitlines()[-2:][0] == "..."
    assert error.splitlines()[-1].startswith("4 failed, 1 passed, 2 errors")


def test_last_error_of_other_output_is_its_last_lines_within_the_limit() -> None:
    output = "".join(f"line {number}\n" for number in range(1000))
    error = last_error(output, limit=50)
    assert error.endswith("line 999") and len(error) <= 50
    assert error.splitlines()[0].startswith("line 99")
    assert last_error("x" * 5000, limit=100) == "x" * 100
    assert last_error("") == ""
