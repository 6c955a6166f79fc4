"""Eval checks decided against what a task did, the offline judge, the scripted model's
answers, the comparison of two runs and the JUnit XML a CI gate reads."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from activities.llm.scripted import answer_index, scripted_reply
from surfaces.evals.checks import CheckResult, rule_checks
from surfaces.evals.dataset import Case
from surfaces.evals.facts import Asked, Facts, ToolUse
from surfaces.evals.judge import _parsed, offline_verdict
from surfaces.evals.junit import junit_xml
from surfaces.evals.report import changes
from surfaces.evals.results import CaseRun, EvalRun

FACTS = Facts(
    task_id="task-eval-x",
    status="SUCCESS",
    reply="Opened the issue for the flaky deploy step.",
    tools=[
        ToolUse("github.create_issue", {"repo": "acme/platform", "title": "Flaky deploy step", "number": 7})
    ],
    approvals=[Asked("github.create_issue", {"repo": "acme/platform"}, "approved")],
    steps=3,
    cost_usd=0.002,
)


def verdicts(checks: dict[str, object]) -> dict[str, bool]:
    case = Case.model_validate({"id": "c", "request": "r", "checks": checks})
    return {r.name: r.passed for r in rule_checks(case.checks, FACTS)}


def test_tool_checks_match_arguments_by_equals_contains_and_regex() -> None:
    assert verdicts(
        {
            "tools_called": [
                {"tool": "github.create_issue", "args": {"repo": "acme/platform"}},
                {"tool": "github.create_issue", "args": {"title": {"contains": "flaky"}, "number": "7"}},
                {"tool": "github.create_issue", "args": {"title": {"regex": "^Flaky"}}},
                {"tool": "github.create_issue", "args": {"repo": "acme/other"}},
                {"tool": "memory.save"},
            ],
            "tools_not_called": [{"tool": "memory.save"}, {"tool": "github.create_issue"}],
            "approvals_asked": [{"tool": "github.create_issue", "args": {"repo": "acme/platform"}}],
        }
    ) == {
        "tools_called[0]:github.create_issue": True,
        "tools_called[1]:github.create_issue": True,
        "tools_called[2]:github.create_issue": True,
        "tools_called[3]:github.create_issue": False,
        "tools_called[4]:memory.save": False,
        "tools_not_called[0]:memory.save": True,
        "tools_not_called[1]:github.create_issue": False,
        "approvals_asked[0]:github.create_issue": True,
    }


def test_reply_status_and_ceilings_fail_with_the_reason() -> None:
    case = Case.model_validate(
        {
            "id": "c",
            "request": "r",
            "checks": {
                "reply_contains": ["FLAKY DEPLOY", "pull request"],
                "reply_not_contains": ["opened"],
                "status": "success",
                "max_steps": 2,
                "max_cost_usd": 0.01,
            },
        }
    )
    results = {r.name: r for r in rule_checks(case.checks, FACTS)}
    assert [n for n, r in results.items() if r.passed] == ["reply_contains[0]", "status", "max_cost_usd"]
    assert results["reply_contains[1]"].detail == "'pull request' not in the reply"
    assert results["reply_not_contains[0]"].detail == "'opened' is in the reply"
    assert results["max_steps"].detail == "3 steps > 2"


def test_an_output_schema_reads_the_reply_as_json() -> None:
    schema = {
        "type": "object",
        "required": ["severity"],
        "properties": {"severity": {"enum": ["low", "high"]}},
    }
    case = Case.model_validate({"id": "c", "request": "r", "checks": {"output_schema": schema}})

    def check(reply: str) -> CheckResult:
        (result,) = rule_checks(case.checks, Facts("t", "SUCCESS", reply))
        return result

    assert check('```json\n{"severity": "high"}\n```').passed
    assert check('{"severity": "urgent"}').detail == "severity: 'urgent' is not one of ['low', 'high']"
    assert check("{}").detail == "(the whole reply): 'severity' is a required property"
    assert check("High severity.").detail.startswith("the reply is not JSON (")


def test_a_failed_tool_check_says_what_was_called_instead() -> None:
    case = Case.model_validate(
        {
            "id": "c",
            "request": "r",
            "checks": {"tools_called": [{"tool": "github.create_issue", "args": {"repo": "x/y"}}]},
        }
    )
    (result,) = rule_checks(case.checks, FACTS)
    assert not result.passed and result.detail.startswith('github.create_issue was called with {"number": 7')


def test_the_offline_judge_wants_every_quoted_phrase_and_a_reply() -> None:
    assert offline_verdict('Names "flaky deploy" and `issue`.', FACTS.reply)[0]
    passed, reason = offline_verdict('Names "rollback".', FACTS.reply)
    assert not passed and reason == "the reply does not mention 'rollback'"
    assert offline_verdict("Anything.", "  ") == (False, "the task gave no reply")


def test_a_judge_answer_is_read_as_json_or_failed() -> None:
    assert _parsed('Sure: {"pass": true, "reason": "names the repo"}') == (True, "names the repo")
    assert _parsed('{"pass": "yes"}')[0] is False
    assert _parsed("looks fine to me")[1].startswith("the judge did not answer with {pass, reason}")


def test_the_scripted_model_answers_in_order_then_says_it_has_none_left() -> None:
    answers = [{"tool_calls": [{"tool": "memory.save", "args": {"content": "x"}}]}, {"text": "Done."}]
    text, calls = scripted_reply(answers, answer_index([{"role": "user", "content": "hi"}]))
    assert (
        text == "" and calls[0].name == "memory__save" and json.loads(calls[0].arguments) == {"content": "x"}
    )
    later = [{"role": "user"}, {"role": "assistant"}, {"role": "tool"}]
    assert scripted_reply(answers, answer_index(later)) == ("Done.", [])
    assert "no answer left" in scripted_reply(answers, 2)[0]


def run(label: str, results: list[CaseRun]) -> EvalRun:
    return EvalRun(
        label, "d.yaml", "helper", 1, None, label, datetime(2026, 1, 1, tzinfo=UTC), results=results
    )


def case(case_id: str, repeat: int, *checks: tuple[str, bool]) -> CaseRun:
    return CaseRun(
        case_id, repeat, f"task-{case_id}-{repeat}", "SUCCESS", [CheckResult(n, p, "why") for n, p in checks]
    )


def test_a_comparison_shows_each_regressed_case_and_check() -> None:
    before = run("v1", [case("a", 1, ("tools_called[0]:x", True)), case("b", 1, ("status", False))])
    after = run("v2", [case("a", 1, ("tools_called[0]:x", False)), case("b", 1, ("status", True))])
    found = {(c.case_id, c.check): (c.before, c.after, c.regressed) for c in changes(before, after)}
    assert found == {
        ("a", ""): (True, False, True),
        ("a", "tools_called[0]:x"): (True, False, True),
        ("b", ""): (False, True, False),
        ("b", "status"): (False, True, False),
    }
    assert changes(before, before) == []


def test_junit_has_a_testcase_per_case_and_repeat_and_a_failure_per_failed_check() -> None:
    done = run("helper v1", [case("a", 1, ("x", True)), case("a", 2, ("x", False), ("y", False))])
    root = ET.fromstring(junit_xml([done]))
    suite = root.find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["a", "a #2"]
    assert [f.get("message") for f in cases[1].findall("failure")] == ["x: why", "y: why"]
    assert "openloop explain task-a-2" in (cases[1].findall("failure")[0].text or "")
