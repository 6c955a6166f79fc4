"""Each check of a case decided against the facts of its task: pure, no I/O.

A check's name is stable across runs (`tools_called[0]:github.create_issue`,
`reply_contains[1]`, `max_cost_usd`), so a comparison of two runs lines the same checks up.
The judge is asynchronous (it calls a model) and lives in `surfaces.evals.judge`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from surfaces.evals.dataset import Checks, Matcher, ToolCheck
from surfaces.evals.facts import Asked, Facts, ToolUse

__all__ = ["CheckResult", "args_match", "rule_checks"]

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str = ""  # why it failed (or, for the judge, its reason)


def _matches(matcher: Matcher, value: Any) -> bool:
    if matcher.equals is not None:
        return bool(
            value == matcher.equals or (not isinstance(value, str) and str(value) == str(matcher.equals))
        )
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if matcher.contains is not None:
        return matcher.contains.lower() in text.lower()
    return matcher.regex is not None and re.search(matcher.regex, text) is not None


def args_match(wanted: dict[str, Matcher], args: dict[str, Any]) -> bool:
    return all(key in args and _matches(m, args[key]) for key, m in wanted.items())


def _found(check: ToolCheck, uses: Sequence[ToolUse | Asked]) -> bool:
    return any(u.tool == check.tool and args_match(check.args, u.args) for u in uses)


def _seen(uses: Sequence[ToolUse | Asked], tool: str) -> str:
    same = [json.dumps(u.args, sort_keys=True)[:120] for u in uses if u.tool == tool]
    if same:
        return f"{tool} was called with {'; '.join(same)}"
    called = sorted({u.tool for u in uses})
    return f"called: {', '.join(called)}" if called else "no tool was called"


def rule_checks(checks: Checks, facts: Facts) -> list[CheckResult]:
    """Every check but the judge, in the order the case lists them."""
    results: list[CheckResult] = []
    for i, tool in enumerate(checks.tools_called):
        ok = _found(tool, facts.tools)
        results.append(
            CheckResult(f"tools_called[{i}]:{tool.tool}", ok, "" if ok else _seen(facts.tools, tool.tool))
        )
    for i, tool in enumerate(checks.tools_not_called):
        ok = not _found(tool, facts.tools)
        results.append(
            CheckResult(f"tools_not_called[{i}]:{tool.tool}", ok, "" if ok else _seen(facts.tools, tool.tool))
        )
    for i, approval in enumerate(checks.approvals_asked):
        ok = _found(approval, facts.approvals)
        detail = "" if ok else f"approvals asked: {', '.join(a.tool for a in facts.approvals) or 'none'}"
        results.append(CheckResult(f"approvals_asked[{i}]:{approval.tool}", ok, detail))
    reply = facts.reply.lower()
    for i, text in enumerate(checks.reply_contains):
        ok = text.lower() in reply
        results.append(CheckResult(f"reply_contains[{i}]", ok, "" if ok else f"{text!r} not in the reply"))
    for i, text in enumerate(checks.reply_not_contains):
        ok = text.lower() not in reply
        results.append(CheckResult(f"reply_not_contains[{i}]", ok, "" if ok else f"{text!r} is in the reply"))
    if checks.status is not None:
        ok = facts.status == checks.status.upper()
        results.append(CheckResult("status", ok, "" if ok else f"ended {facts.status}, not {checks.status}"))
    if checks.max_cost_usd is not None:
        ok = facts.cost_usd <= checks.max_cost_usd
        detail = "" if ok else f"cost ${facts.cost_usd:.4f} > ${checks.max_cost_usd:.4f}"
        results.append(CheckResult("max_cost_usd", ok, detail))
    if checks.max_steps is not None:
        ok = facts.steps <= checks.max_steps
        results.append(
            CheckResult("max_steps", ok, "" if ok else f"{facts.steps} steps > {checks.max_steps}")
        )
    if checks.output_schema is not None:
        results.append(_output_check(checks.output_schema, facts.reply))
    return results


def _output_check(schema: dict[str, Any], reply: str) -> CheckResult:
    """The reply as a JSON object (a fenced ```json block is read too) against `schema`."""
    text = _FENCE.sub("", reply.strip())
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return CheckResult("output_schema", False, f"the reply is not JSON ({exc.msg})")
    problem = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if problem is None:
        return CheckResult("output_schema", True)
    where = "/".join(str(part) for part in problem.absolute_path) or "(the whole reply)"
    return CheckResult("output_schema", False, f"{where}: {problem.message}"[:300])
