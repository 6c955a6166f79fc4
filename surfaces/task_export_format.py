"""The line format of `openloop tasks export` (version 1): one JSON object per line.

The first line is the header; every line after it is one record of the run, in time order,
numbered by `seq` from 1. Every record has `type`, `seq`, `task_id` (the task it belongs to:
a child's records, exported with `--with-children`, carry the child's id) and `at` (UTC,
ISO 8601, when the history recorded it).

    openloop.task_export  the header: version, task, agent and version, when exported
    task                  the request: who asked, where, the task kind, its parent, its tools
    step                  a step begins: its model calls, tool calls, tokens and cost
    model_call            one call: model, provider, the messages as sent, the answer,
                          tokens in/out, cost, latency
    tool_call             one tool: arguments, result, ok or the error kind, duration, how it
                          ran, who approved it
    approval_requested    the task asked approvers to allow an action (exact arguments)
    approval_decided      approved, denied, expired or cancelled; by whom, when
    signal                a person steered the task: a message, cancel, budget extension, a
                          decision (counted or ignored, with why)
    child                 a subagent or teammate started: its agent, request, how it ended
    end                   how the task ended, with its totals

Lines are canonical JSON (keys sorted, no spaces, UTF-8), so a file re-serialised by
`load_export` and `dump_export` is byte-identical and two exports of a finished task differ
only in `exported_at`. Every string has been through the audit ledger's masking
(`activities.store.ledger.mask_secrets`): token-shaped values and secret-looking argument
keys read `***`. Any change to a record's fields is a new version: a reader of version 1
refuses an unknown record type or field, naming the line, rather than guess.
The JSON Schema of a line is `surfaces/task_export.schema.json`, derived from these models:
after changing one, write it again with `python -m surfaces.task_export_format`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

FORMAT: Literal["openloop.task_export"] = "openloop.task_export"
VERSION: Literal[1] = 1


class _Line(BaseModel):
    # Every field is on every line, so the schema requires them all, defaults included.
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


class Header(_Line):
    type: Literal["openloop.task_export"] = FORMAT
    version: Literal[1] = VERSION
    task_id: str
    agent: str | None = Field(description="The agent's name; null when the history cannot say")
    agent_version: int | None
    exported_at: str = Field(description="UTC, ISO 8601; pinned by SOURCE_DATE_EPOCH when set")
    with_children: bool = Field(description="Children's records are inline (tagged by task_id)")


class _Record(_Line):
    seq: int = Field(0, description="1, 2, 3... in the order of the lines")
    task_id: str
    at: str = Field(description="UTC, ISO 8601: when the history recorded it")


class TaskRecord(_Record):
    type: Literal["task"] = "task"
    request: str
    requested_by: str
    surface: str
    channel: str
    thread: str | None
    task_kind: str
    parent: str | None = Field(description="The task that started this one, for a child")
    tools: list[str] = Field(description="The tools the task started with")


class StepRecord(_Record):
    type: Literal["step"] = "step"
    step: int
    model_calls: int
    tool_calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float


class ToolCallAsked(_Line):
    id: str
    name: str = Field(description="The tool's name as offered to the model")
    arguments: Any = Field(description="The arguments as an object; the raw text when not JSON")


class ModelOutput(_Line):
    text: str
    tool_calls: list[ToolCallAsked]
    finish_reason: str = Field(description="stop | tool_calls | length | budget | refused | empty")


class ModelCallRecord(_Record):
    type: Literal["model_call"] = "model_call"
    step: int
    purpose: str = Field(description="step | summary | final")
    model: str = Field(description="The model that answered (after any fallback)")
    provider: str
    messages: list[dict[str, Any]] | None = Field(
        description="The messages as sent (OpenAI chat format); null when the transcript is gone"
    )
    tools_offered: list[str] | None = Field(description="null: the task's tools")
    output: ModelOutput
    tokens_in: int
    tokens_out: int
    cached_tokens: int
    reasoning_tokens: int
    cost_usd: float
    latency_ms: int | None
    offline: bool
    attempt: int = Field(description="The activity attempt that answered")


class ToolCallRecord(_Record):
    type: Literal["tool_call"] = "tool_call"
    step: int | None
    call_id: str | None
    tool: str
    arguments: Any
    ok: bool
    error_kind: str | None = Field(description="not_found | invalid | permission | failed | ...")
    result: str = Field(description="What the model was given: the output or the error")
    result_ref: str | None = Field(description="Where a large output is stored whole")
    duration_ms: int | None
    ran: Literal["activity", "local", "folded", "workspace", "refused"] = Field(
        description=(
            "folded: run inside the next model call, before the model was asked; refused: "
            "never run (policy, invalid arguments), `result` says why"
        )
    )
    approved_by: str | None


class ApprovalRequestedRecord(_Record):
    type: Literal["approval_requested"] = "approval_requested"
    request_id: str
    action_id: str
    tool: str
    arguments: Any
    approvers: list[str]
    expires_at: str
    estimated_cost_usd: float


class ApprovalDecidedRecord(_Record):
    type: Literal["approval_decided"] = "approval_decided"
    request_id: str
    action_id: str
    tool: str
    outcome: str = Field(description="approved | denied | expired | cancelled")
    decided_by: str | None
    decided_at: str


class SignalRecord(_Record):
    type: Literal["signal"] = "signal"
    name: str = Field(description="user_message | cancel | extend_budget | approve | deny")
    via: Literal["signal", "update"]
    by: str | None
    counted: bool = Field(description="False: the task ignored it (the text says why)")
    text: str = Field(description="As `openloop explain` tells it: a message's first 100 characters")


class ChildRecord(_Record):
    type: Literal["child"] = "child"
    child_task_id: str
    role: str = Field(description="subagent | teammate")
    agent: str
    request: str
    status: str | None = Field(description="How it ended; null while it runs")
    reason: str | None
    steps: int | None
    cost_usd: float | None


class EndRecord(_Record):
    type: Literal["end"] = "end"
    status: str = Field(description="SUCCESS, ERROR, ... or how Temporal closed it")
    reason: str
    next_action: str
    reply: str
    steps: int
    tokens_in: int = Field(description="As its budget counted them: its children's too")
    tokens_out: int
    cost_usd: float = Field(description="The task's spend as its budget counted it: its children's too")
    model_calls: int
    tool_calls: int


Record = Annotated[
    TaskRecord
    | StepRecord
    | ModelCallRecord
    | ToolCallRecord
    | ApprovalRequestedRecord
    | ApprovalDecidedRecord
    | SignalRecord
    | ChildRecord
    | EndRecord,
    Field(discriminator="type"),
]
_RECORD: TypeAdapter[Record] = TypeAdapter(Record)


@dataclass
class TaskExport:
    header: Header
    records: list[Record]


class ExportError(ValueError):
    """A line that is not version 1 of the format."""


def dump_line(line: BaseModel) -> str:
    """One canonical line: keys sorted, no spaces, UTF-8, every field (nulls included)."""
    return json.dumps(line.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def dump_export(export: TaskExport) -> str:
    return "".join(dump_line(line) + "\n" for line in [export.header, *export.records])


def load_export(lines: Iterable[str], source: str = "<export>") -> TaskExport:
    """Typed records from an export's lines; an error names the line and the field."""
    header: Header | None = None
    records: list[Record] = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            raw = json.loads(text)
            if header is None:
                if not isinstance(raw, dict) or raw.get("type") != FORMAT or raw.get("version") != VERSION:
                    raise ExportError(
                        f"{source}, line {number}: not a version {VERSION} {FORMAT} header; "
                        "export the task again with this version of openloop"
                    )
                header = Header.model_validate(raw)
            else:
                records.append(_RECORD.validate_python(raw))
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            raise ExportError(f"{source}, line {number}, field {where}: {problem['msg']}") from None
        except json.JSONDecodeError as exc:
            raise ExportError(f"{source}, line {number}: not JSON ({exc.msg})") from None
    if header is None:
        raise ExportError(f"{source}: empty; an export starts with its {FORMAT} header")
    return TaskExport(header, records)


def schema() -> dict[str, Any]:
    """The JSON Schema of one line (a header or a record)."""
    line: TypeAdapter[Header | Record] = TypeAdapter(Header | Record)  # type: ignore[arg-type]
    found = line.json_schema(mode="serialization")
    found["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    found["title"] = f"{FORMAT} version {VERSION}, one line"
    return found


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).with_name("task_export.schema.json")
    target.write_text(json.dumps(schema(), indent=2, sort_keys=True) + "\n")
