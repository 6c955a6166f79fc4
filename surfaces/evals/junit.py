"""JUnit XML for CI gates: one testsuite per run, one testcase per case x repeat, one
<failure> per failed check (its name and why)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from surfaces.evals.results import EvalRun

__all__ = ["junit_xml"]


def junit_xml(runs: Sequence[EvalRun]) -> str:
    suites = ET.Element("testsuites", name="openloop eval")
    for run in runs:
        failures = sum(1 for r in run.results if not r.passed)  # testcases with a <failure>
        seconds = sum(r.latency_ms for r in run.results) / 1000
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=run.label,
            tests=str(len(run.results)),
            failures=str(failures),
            errors="0",
            time=f"{seconds:.3f}",
        )
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="run_id", value=run.id)
        for r in run.results:
            name = r.case_id if r.repeat == 1 else f"{r.case_id} #{r.repeat}"
            case = ET.SubElement(
                suite, "testcase", classname=run.label, name=name, time=f"{r.latency_ms / 1000:.3f}"
            )
            for check in r.failed_checks:
                failure = ET.SubElement(
                    case, "failure", message=f"{check.name}: {check.detail}", type=check.name
                )
                failure.text = (
                    f"{check.detail}\nsee why: openloop explain {r.task_id}" if r.task_id else check.detail
                )
            if r.task_id:
                ET.SubElement(case, "system-out").text = f"task {r.task_id} ended {r.status}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
