"""JUnit XML reports (pytest's `--junitxml` and other runners'): failing test ids and how
many tests ran. A report is parsed only when small enough and free of DTDs, so a hostile one
can neither exhaust memory nor expand entities. Pytest's reports are read back to pytest
node ids; others' as `classname::name`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

__all__ = ["MAX_REPORT_CHARS", "junit_failures", "junit_ran"]

# A JUnit report larger than this is not parsed (pytest's are a few hundred bytes a test).
MAX_REPORT_CHARS = 16 * 2**20
_TEST_MODULE = re.compile(r"^(test_.*|.*_test)$")


def _pytest_id(classname: str, name: str, file: str | None) -> str:
    """pytest's junit `classname` and `name` back to its node id: `tests.test_calc.TestCalc`
    and `test_add` -> `tests/test_calc.py::TestCalc::test_add`."""
    if not classname:
        # A collection error: `name` is the module, dotted.
        return name.replace(".", "/") + ".py"
    parts = classname.split(".")
    module_length = None
    if file:
        file_parts = file.removesuffix(".py").replace("\\", "/").split("/")
        if parts[: len(file_parts)] == file_parts:
            module_length = len(file_parts)
    if module_length is None:
        modules = [index for index, part in enumerate(parts) if _TEST_MODULE.match(part)]
        classes = [index for index, part in enumerate(parts) if part[:1].isupper()]
        module_length = modules[-1] + 1 if modules else classes[0] if classes else len(parts)
    path = file or "/".join(parts[:module_length]) + ".py"
    return "::".join([path, *parts[module_length:], name])


def _junit(text: str) -> ElementTree.Element | None:
    """A JUnit XML report's root; None when it is not one we can read safely."""
    if len(text) > MAX_REPORT_CHARS or "<!doctype" in text.lower():
        return None
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return None
    return root if root.tag in ("testsuites", "testsuite") else None


def junit_ran(text: str) -> int | None:
    """How many test cases of a JUnit report ran (were not skipped)."""
    root = _junit(text)
    if root is None:
        return None
    return sum(1 for case in root.iter("testcase") if not any(c.tag == "skipped" for c in case))


def junit_failures(text: str) -> set[str] | None:
    """Failing test ids in a JUnit XML report; None when it is not one we can read safely."""
    root = _junit(text)
    if root is None:
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    made_by_pytest = any(suite.get("name") == "pytest" for suite in suites)
    failing: set[str] = set()
    for case in root.iter("testcase"):
        if not any(child.tag in ("failure", "error") for child in case):
            continue
        classname, name = case.get("classname", ""), case.get("name", "")
        if made_by_pytest:
            failing.add(_pytest_id(classname, name, case.get("file")))
        else:
            failing.add(f"{classname}::{name}" if classname else name)
    return failing
