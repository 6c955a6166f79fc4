"""Failing test ids and counts from runners other than pytest, read from their real output
(tests/fixtures/runners/ORIGIN.md says where each sample came from) and, for unittest, from a
run made here and now.

The unittest samples are of this project:

    calc.py:       def add(a, b): return a + b
    test_calc.py:  class TestCalc(unittest.TestCase) with test_add (passes), test_zero (fails),
                   test_crash (raises), test_documented (a docstring; fails), test_skipped
                   (skipped), test_sub (three subtests, i=2 fails)
    test_broken.py: import no_such_module
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from activities.loops.output_reading import failing_tests, ran_count

RUNNERS = Path(__file__).resolve().parents[1] / "fixtures" / "runners"
UNITTEST_FAILING = [
    "test_broken",  # the module that did not import
    "test_calc.TestCalc.test_crash",
    "test_calc.TestCalc.test_documented",
    "test_calc.TestCalc.test_sub",
    "test_calc.TestCalc.test_zero",
]


def sample(name: str) -> str:
    return (RUNNERS / name).read_text()


@pytest.mark.parametrize(
    ("name", "ran"),
    [
        ("unittest-v-3.10.13.txt", 6),  # `test_x (module.Class)`: the same ids
        ("unittest-3.11.7.txt", 6),  # no -v: the FAIL/ERROR headers name them
        ("unittest-v-3.12.1.txt", 5),  # 3.12.1's `Ran 6` already leaves the skipped test out
        ("unittest-v-3.13.0.txt", 6),  # `test_x (module.Class.test_x)`
    ],
)
def test_unittest_names_each_failure_the_way_unittest_reruns_it(name: str, ran: int) -> None:
    assert failing_tests(sample(name)) == UNITTEST_FAILING
    assert ran_count(sample(name)) == ran


def test_a_passing_unittest_run_has_no_failures_and_counts_its_tests() -> None:
    assert failing_tests(sample("unittest-v-pass-3.13.0.txt")) == []
    assert ran_count(sample("unittest-v-pass-3.13.0.txt")) == 1


def test_unittest_verbose_lines_name_failures_whose_details_were_cut() -> None:
    # The loop keeps the end of a long output; here only the -v lines survived.
    head = sample("unittest-v-3.13.0.txt").split("=" * 70)[0]
    assert failing_tests(head) == UNITTEST_FAILING
    assert ran_count(head) is None  # no summary: how many ran is not known


def test_unittest_run_here_and_now(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "test_calc.py").write_text(
        textwrap.dedent(
            """
            import unittest
            from calc import add

            class TestCalc(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(add(2, 3), 5)

                def test_zero(self):
                    self.assertEqual(add(0, 0), 0)
            """
        )
    )
    for flags in (["-v"], []):
        done = subprocess.run(
            [sys.executable, "-m", "unittest", *flags],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
            check=False,
        )
        assert failing_tests(done.stdout) == ["test_calc.TestCalc.test_add"], done.stdout
        assert ran_count(done.stdout) == 2


def test_go_test_json_names_package_and_test_and_a_package_that_did_not_build() -> None:
    assert failing_tests(sample("go-test-json.txt")) == [
        "example.com/calc/broken",
        "example.com/calc::TestDivide",
        "example.com/calc::TestDivide/by_zero",
        "example.com/calc::TestMean",
    ]
    assert ran_count(sample("go-test-json.txt")) == 5  # TestSlow skipped; subtests count
    assert failing_tests(sample("go-test-json-pass.txt")) == []
    assert ran_count(sample("go-test-json-pass.txt")) == 2


def test_jest_json_names_file_and_full_name_relative_to_the_workspace() -> None:
    text = sample("jest-json.txt")
    assert failing_tests(text, root="/home/dev/calc") == [
        "src/calc.test.js::calc mean averages three numbers",
        "src/parse.test.js",  # failed to run: a syntax error
    ]
    assert ran_count(text, root="/home/dev/calc") == 4  # the pending test did not run
    # Checked out elsewhere, the same tests keep the same ids.
    moved = text.replace("/home/dev/calc/", "/srv/work/loop-1/")
    assert failing_tests(moved, root="/srv/work/loop-1") == failing_tests(text, root="/home/dev/calc")


def test_vitest_json_reporter_is_read_like_jest() -> None:
    assert failing_tests(sample("vitest-json.txt"), root="/home/dev/calc") == [
        "src/calc.test.ts::calc mean averages three numbers"
    ]
    assert ran_count(sample("vitest-json.txt"), root="/home/dev/calc") == 3


def test_a_jest_report_written_with_output_file_is_read(tmp_path: Path) -> None:
    report = sample("jest-json.txt").split("\n")[3]
    files = {"results.json": report}
    command = "npx jest --json --outputFile=results.json"
    assert failing_tests("Tests: 1 failed", files.get, command=command, root="/home/dev/calc") == [
        "src/calc.test.js::calc mean averages three numbers",
        "src/parse.test.js",
    ]


def test_cargo_test_names_target_and_path_and_doc_tests_without_line_numbers() -> None:
    assert failing_tests(sample("cargo-test.txt")) == [
        "src/lib.rs - mean",  # line numbers move whenever code above the doc test does
        "src/lib.rs::tests::it_means",
        "tests/integration.rs::means_one",
    ]
    assert ran_count(sample("cargo-test.txt")) == 6  # the ignored test did not run
    assert failing_tests(sample("cargo-test-pass.txt")) == []
    assert ran_count(sample("cargo-test-pass.txt")) == 6


def test_a_build_that_fails_names_no_tests() -> None:
    assert failing_tests(sample("cargo-test-compile-error.txt")) is None
    assert ran_count(sample("cargo-test-compile-error.txt")) is None


def test_output_of_no_known_runner_names_no_tests() -> None:
    text = "checking...\n3 problems found\nmake: *** [test] Error 1\n"
    assert failing_tests(text) is None and ran_count(text) is None
