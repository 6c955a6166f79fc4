"""What a finished task did, as the checks read it: read from its export
(`surfaces.cli.task_export.build_export`), so an eval sees exactly what `openloop tasks export`
shows: the tools the model asked for, the approvals asked and how they were decided, the
reply, steps, tokens and cost."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from surfaces.task_export_format import (
    ApprovalDecidedRecord,
    ApprovalRequestedRecord,
    EndRecord,
    ModelCallRecord,
    TaskExport,
    TaskRecord,
    ToolCallRecord,
)
from workflows.tool_catalog import model_tool_name
from workflows.untrusted import unwrap


@dataclass(frozen=True)
class ToolUse:
    tool: str
    args: dict[str, Any]
    ran: str = "activity"  # or refused (policy, a denied approval), folded, local...


@dataclass(frozen=True)
class Asked:
    tool: str
    args: dict[str, Any]
    outcome: str = "pending"  # approved | denied | expired | cancelled


@dataclass
class Facts:
    task_id: str
    status: str
    reply: str
    request: str = ""
    channel: str = ""
    tools: list[ToolUse] = field(default_factory=list)
    approvals: list[Asked] = field(default_factory=list)
    steps: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: int = 0
    memories_read: list[str] = field(default_factory=list)  # what memory.search returned
    thread_read: list[str] = field(default_factory=list)  # what slack.read_thread returned


def _args(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"_raw": value}


def _tool_name(asked: str, names: dict[str, str]) -> str:
    """The catalog's name (`github.create_issue`) of a name as offered to a model."""
    return names.get(asked, asked)


def facts_of(export: TaskExport, latency_ms: int = 0) -> Facts:
    """The facts of the task at the head of `export` (its children's records are not its own)."""
    own = [r for r in export.records if r.task_id == export.header.task_id]
    task = next((r for r in own if isinstance(r, TaskRecord)), None)
    end = next((r for r in reversed(own) if isinstance(r, EndRecord)), None)
    names = {model_tool_name(t): t for t in (task.tools if task else [])}
    facts = Facts(
        task_id=export.header.task_id,
        status=end.status if end else "RUNNING",
        reply=end.reply if end else "",
        request=task.request if task else "",
        channel=task.channel if task else "",
        steps=end.steps if end else 0,
        tokens_in=end.tokens_in if end else 0,
        tokens_out=end.tokens_out if end else 0,
        cost_usd=end.cost_usd if end else 0.0,
        latency_ms=latency_ms,
    )
    asked_ids: set[str] = set()
    for record in own:
        if isinstance(record, ModelCallRecord):
            for call in record.output.tool_calls:
                # What the model asked for, whether it then ran, waited or was refused.
                asked_ids.add(call.id)
                facts.tools.append(ToolUse(_tool_name(call.name, names), _args(call.arguments), "asked"))
        elif isinstance(record, ToolCallRecord):
            if record.call_id in asked_ids:
                _mark_ran(facts, record)
            else:
                facts.tools.append(
                    ToolUse(_tool_name(record.tool, names), _args(record.arguments), record.ran)
                )
            if record.ok and record.tool in _CONTEXT_TOOLS:
                _read_context(facts, record.tool, record.result)
        elif isinstance(record, ApprovalRequestedRecord):
            facts.approvals.append(Asked(_tool_name(record.tool, names), _args(record.arguments)))
        elif isinstance(record, ApprovalDecidedRecord):
            _decided(facts, record)
    return facts


_CONTEXT_TOOLS = ("memory.search", "slack.read_thread")
_MEMORY_LINE = re.compile(r"^\d+\. \(\d{4}-\d\d-\d\d\) (.+)$")  # activities.tools.memory_tools.search
_THREAD_HEADER = re.compile(r"^Thread \S+ in \S+: \d+ message")


def _read_context(facts: Facts, tool: str, result: str) -> None:
    lines = unwrap(result).splitlines()
    if tool == "memory.search":
        found = [m.group(1) for m in map(_MEMORY_LINE.match, lines) if m]
        facts.memories_read += [text for text in found if text not in facts.memories_read]
    elif lines and _THREAD_HEADER.match(lines[0]):
        facts.thread_read = [line for line in lines[1:] if line.strip()]


def _mark_ran(facts: Facts, record: ToolCallRecord) -> None:
    for index in range(len(facts.tools) - 1, -1, -1):
        use = facts.tools[index]
        if use.ran == "asked" and use.args == _args(record.arguments):
            facts.tools[index] = ToolUse(use.tool, use.args, record.ran)
            return


def _decided(facts: Facts, record: ApprovalDecidedRecord) -> None:
    for index, asked in enumerate(facts.approvals):
        if asked.outcome == "pending":
            facts.approvals[index] = Asked(asked.tool, asked.args, record.outcome)
            return
