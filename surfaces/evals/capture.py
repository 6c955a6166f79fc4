"""`openloop eval capture TASK_ID`: a finished task as a case to edit.

The task is read through the task export's readers (`build_export`), like everything an
eval reads: its request, the context it read (the memories `memory.search` returned, the
thread `slack.read_thread` returned) and what it did. The checks are pre-filled from what
happened: each tool it called (a writing tool's arguments matched exactly), each approval
asked, how it ended, its first reply line, and ceilings with room (twice its steps and cost).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from temporalio.client import Client

from activities.tools.catalog import native
from surfaces.cli.task_export import build_export, exported_at
from surfaces.evals.dataset import Case
from surfaces.evals.facts import Facts, facts_of
from workflows.task_basics import TaskStatus

__all__ = ["capture_case", "case_from_facts", "dump_case"]

MIN_COST_CEILING_USD = 0.01
_UNSAFE_ID = re.compile(r"[^a-z0-9._-]+")


class StillRunning(RuntimeError):
    """The task has not finished: what it did is not yet known."""


def _case_id(task_id: str) -> str:
    return (_UNSAFE_ID.sub("-", task_id.lower()).strip("-.") or "captured")[:63]


def _writes(tool: str) -> bool:
    found = native(tool)
    return bool(found and found.spec.writes)


def _first_line(reply: str) -> str | None:
    """A phrase of the reply to expect again: its first line, cut at a word, without labels."""
    line = next((text.strip() for text in reply.splitlines() if text.strip()), "")
    line = re.sub(r"^\[[^\]]+\]\s*", "", line)  # "[offline model] ..."
    if not line:
        return None
    return line if len(line) <= 60 else line[:60].rsplit(" ", 1)[0]


def case_from_facts(facts: Facts, agent: str | None) -> dict[str, Any]:
    """The case (as a mapping, ready to write as YAML) for a finished task's facts."""
    called: list[dict[str, Any]] = []
    for use in facts.tools:
        check: dict[str, Any] = {"tool": use.tool}
        if _writes(use.tool) and use.args:
            check["args"] = dict(use.args)
        if check not in called:
            called.append(check)
    checks: dict[str, Any] = {"tools_called": called}
    asked = [{"tool": a.tool} for a in facts.approvals]
    if asked:
        checks["approvals_asked"] = asked
    phrase = _first_line(facts.reply)
    if phrase:
        checks["reply_contains"] = [phrase]
    checks["status"] = facts.status
    checks["max_steps"] = max(facts.steps * 2, facts.steps + 2)
    checks["max_cost_usd"] = max(MIN_COST_CEILING_USD, round(facts.cost_usd * 2, 4))
    case: dict[str, Any] = {
        "id": _case_id(facts.task_id),
        "request": facts.request,
    }
    if agent:
        case["agent"] = agent
    context: dict[str, Any] = {}
    if facts.thread_read:
        context["thread"] = facts.thread_read
    if facts.memories_read:
        context["memories"] = facts.memories_read
    if context:
        case["context"] = context
    if any(a.outcome == "approved" for a in facts.approvals):
        case["approve"] = True
    case["checks"] = checks
    Case.model_validate(case)  # what we write must load again
    return case


async def capture_case(client: Client, database_url: str | None, task_id: str) -> dict[str, Any]:
    export = await build_export(client, database_url, task_id, False, exported_at())
    facts = facts_of(export)
    if facts.status in TaskStatus.__members__ and not TaskStatus(facts.status).finished:
        raise StillRunning(f"task {task_id} is still {facts.status}; capture it once it has finished")
    return case_from_facts(facts, export.header.agent)


def dump_case(case: dict[str, Any], task_id: str) -> str:
    header = (
        f"# Captured from task {task_id}: edit the checks to what must hold, then add the case\n"
        "# to a dataset and run it with `openloop eval run DATASET --agent NAME`.\n"
    )
    return header + yaml.safe_dump({"cases": [case]}, sort_keys=False, allow_unicode=True, width=100)
