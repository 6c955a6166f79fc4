"""The offline model's one coding skill: fix a divisor one too large, from failing test to
draft pull request.

So that a newcomer without a provider key sees a coding task's whole flow on the demo
project (`config/loops/demo-project`, whose `calc.mean` divides by `len(values) + 1`): open a
workspace of the bound repository, run the tests, search for the bug, edit it, run the tests
again, propose the draft pull request (a person approves the diff) and report. A repair
loop's fixer, lent the loop's workspace and offered no pull request, stops at the report.

Deterministic, like the rest of `activities.offline`: whether to act is read from the
request outside its untrusted-data blocks; what to do next, from the results of its own
tool calls. Any other bug it names plainly as beyond it, and proposes nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from activities.offline import reading
from activities.offline.reading import LABEL, OfflineReply
from workflows.tool_catalog import catalog_tool_name

OPEN = "code.open_workspace"
RUN_TESTS = "code.run_tests"
SEARCH = "code.search"
EDIT = "code.edit_file"
PROPOSE = "github.create_pull_request"
CODE_TOOLS = (RUN_TESTS, SEARCH, EDIT)

_FIX = re.compile(r"\b(fix|fixes|fixing|failing|fails|broken)\b", re.I)
# A CI investigation (`surfaces.github.events.ci_request`) names "the failing test(s)" and "a
# suggested fix" for its report; it asks for a fix only with this sentence.
_CI_INVESTIGATION = "Investigate the failure:"
_CI_FIX = "If the likely cause is in this repository's code, fix it"
_BRANCH = (
    re.compile(r"\bbase=['\"]([\w./-]+)['\"]"),
    re.compile(r"\bon (?:the )?branch [`'\"]?([\w./-]+)"),
    re.compile(r"\bon (main|master)\b"),
)
OFF_BY_ONE = r"/\s*\(\s*len\(\s*\w+\s*\)\s*\+\s*1\s*\)"  # what code.search is asked for
_OFF_BY_ONE = re.compile(r"/\s*\(\s*len\(\s*(\w+)\s*\)\s*\+\s*1\s*\)")
_HIT = re.compile(r"^([^:\n]+):(\d+): (.*)$", re.M)  # code.search's `path:line: text`
_TEST_ID = re.compile(r"[\w./-]+\.py::[\w.:\[\]-]*\w\]?")
_VERDICT = re.compile(r"\b(PASSED|FAILED)\b")
_URL = re.compile(r"https?://[^\s)>\]]+")
KNOWN_BUG = "The offline model knows one kind of bug only, a divisor one too large (`/ (len(x) + 1)`)"


@dataclass
class Done:
    tool: str
    arguments: dict[str, Any]
    result: str


@dataclass
class _Hit:
    path: str
    old: str  # the exact snippet: `/ (len(values) + 1)`
    new: str  # `/ len(values)`


def wants_fix(request_cues: str) -> bool:
    """Whether the request (outside its untrusted-data blocks) asks for a fix."""
    if _CI_INVESTIGATION in request_cues:
        return _CI_FIX in request_cues
    return bool(_FIX.search(request_cues))


def coding_step(
    messages: list[dict[str, Any]], tools: list[str], request_cues: str, system: str
) -> OfflineReply | None:
    """The next step of fixing the known bug, or None when this is no coding task for it:
    the request asks for no fix, no workspace can be opened or is open, or it has answered."""
    if not wants_fix(request_cues) or _answered(messages):
        return None
    done = history(messages)
    opened = [d for d in done if d.tool == OPEN]
    if OPEN in tools:  # no workspace is open yet
        if opened:
            return _text(f"I could not open a workspace to fix this: {_first_line(opened[-1].result)}")
        return _open(messages, request_cues, system)
    missing = [tool for tool in CODE_TOOLS if tool not in tools]
    if len(missing) == len(CODE_TOOLS) and not opened:
        return None
    if missing:
        return _text(f"To fix this I need the tools {', '.join(missing)}, which this agent is not granted.")
    return _fix(messages, tools, done)


def _open(messages: list[dict[str, Any]], cues: str, system: str) -> OfflineReply:
    bound = reading.bound_repos(system)
    if not bound:
        return _text(
            "I would open a workspace to fix this, but no GitHub repository is bound to me "
            "(spec.surfaces.github.repos)."
        )
    named = {name.lower() for name in reading.REPO.findall(cues)}
    repo = next((r for r in bound if r.lower() in named), bound[0])
    base = next((found.group(1).rstrip(".") for p in _BRANCH if (found := p.search(cues))), "main")
    return reading.call(messages, OPEN, {"repo": repo, "base": base})


def _fix(messages: list[dict[str, Any]], tools: list[str], done: list[Done]) -> OfflineReply:
    """Run the tests; on a failure search for the bug and edit it; run them again; propose."""
    edits = [i for i, d in enumerate(done) if d.tool == EDIT]
    edit = done[edits[-1]] if edits else None
    if edit is not None and _is_error(edit.result):
        return _could_not(f"my edit of {edit.arguments.get('path')} was refused: {_first_line(edit.result)}")
    runs = [d for d in done[edits[-1] + 1 if edits else 0 :] if d.tool == RUN_TESTS]
    if not runs:
        return reading.call(messages, RUN_TESTS, {})
    passed = _passed(runs[-1].result)
    if passed is None:
        return _could_not(f"the tests did not run: {_first_line(runs[-1].result)}")
    if edit is None:
        if passed:
            return _text("The tests pass already: there is nothing for me to fix.")
        searches = [d for d in done if d.tool == SEARCH]
        if not searches:
            return reading.call(messages, SEARCH, {"pattern": OFF_BY_ONE})
        hit = _hit(searches[-1].result)
        if hit is None:
            return _could_not(
                f"no line divides by `(len(x) + 1)`, so {_failing(done)} failing has another cause"
            )
        return reading.call(messages, EDIT, {"path": hit.path, "old": hit.old, "new": hit.new})
    if not passed:
        return _could_not(
            f"after changing `{edit.arguments.get('old')}` to `{edit.arguments.get('new')}` in "
            f"{edit.arguments.get('path')} the tests still fail ({_failing(runs)})"
        )
    proposals = [d for d in done if d.tool == PROPOSE]
    if PROPOSE in tools and not proposals:
        return reading.call(
            messages, PROPOSE, {"title": f"Fix {_failing(done)}"[:200], "body": _body(edit, done)}
        )
    return _text(_report(edit, done, proposals[-1].result if proposals else None))


def _body(edit: Done, done: list[Done]) -> str:
    path, old, new = (edit.arguments.get(key) for key in ("path", "old", "new"))
    return (
        f"`{path}` divided by `{_divisor(old)}`, one more than `{_divisor(new)}`, so {_failing(done)} "
        f"failed. This changes `{old}` to `{new}`; the tests pass now.\n\n"
        "Made by OpenLoop's offline demo model (`offline/demo`), which knows this one kind of bug only."
    )


def _report(edit: Done, done: list[Done], proposal: str | None) -> str:
    path, old, new = (edit.arguments.get(key) for key in ("path", "old", "new"))
    lines = [
        f"Fixed {_failing(done)}.",
        f"What was wrong: {path} divided by `{_divisor(old)}`, one more than `{_divisor(new)}`.",
        f"What changed: `{old}` is now `{new}` in {path}.",
        f"Tests before: failed ({_failing(done)}). Tests after: passed.",
    ]
    if proposal is not None:
        link = _URL.search(proposal)
        lines.append(
            f"Draft pull request: {link.group(0).rstrip('.,')}"
            if link and not _is_error(proposal)
            else f"No pull request was opened: {_first_line(proposal)}"
        )
    return "\n".join(lines)


def _divisor(snippet: object) -> str:
    """`(len(values) + 1)` of `/ (len(values) + 1)`."""
    return str(snippet).removeprefix("/").strip()


def history(messages: list[dict[str, Any]]) -> list[Done]:
    """Each tool call the model made, in order, with its result."""
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m["role"] == "tool"}
    done = []
    for message in messages:
        if message["role"] != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            try:
                arguments = json.loads(call["function"]["arguments"] or "{}")
            except json.JSONDecodeError:
                arguments = {}
            tool = catalog_tool_name(call["function"]["name"])
            done.append(
                Done(tool, arguments if isinstance(arguments, dict) else {}, results.get(call["id"], ""))
            )
    return done


def _answered(messages: list[dict[str, Any]]) -> bool:
    """Whether the model already gave its answer (a reply without tool calls) to the request."""
    return any(m["role"] == "assistant" and m.get("content") and not m.get("tool_calls") for m in messages)


def _passed(result: str) -> bool | None:
    """code.run_tests' verdict: its first PASSED or FAILED; None when the tests did not run."""
    found = None if _is_error(result) else _VERDICT.search(result)
    return None if found is None else found.group(1) == "PASSED"


def _failing(done: list[Done]) -> str:
    """The tests the first failing run named, or words for them."""
    for d in done:
        if d.tool == RUN_TESTS and _passed(d.result) is False:
            ids = list(dict.fromkeys(_TEST_ID.findall(d.result)))
            if ids:
                return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    return "the failing tests"


def _hit(result: str) -> _Hit | None:
    """The first line code.search found with the bug in code (not in a string or a comment,
    as a fixer script that names it has it), outside test folders when it can."""
    hits = []
    for path, _line, text in _HIT.findall(result):
        found = _OFF_BY_ONE.search(text)
        if found and _in_code(text[: found.start()]):
            hits.append(_Hit(path.strip(), found.group(0), f"/ len({found.group(1)})"))
    hits.sort(key=lambda hit: any(part.startswith("test") for part in hit.path.split("/")))
    return hits[0] if hits else None


def _in_code(before: str) -> bool:
    """Whether what follows `before` on its line is code: no comment or open quote before it."""
    return "#" not in before and before.count('"') % 2 == 0 and before.count("'") % 2 == 0


def _is_error(result: str) -> bool:
    return result.lstrip().startswith("Error")


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or ["(no answer)"])[0][:300]


def _text(text: str) -> OfflineReply:
    return OfflineReply(f"{LABEL} {text}", [])


def _could_not(why: str) -> OfflineReply:
    return _text(f"I could not fix this: {why}. {KNOWN_BUG}; I propose nothing.")
