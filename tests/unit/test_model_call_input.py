"""ModelCallInput groups its fields; inputs recorded in the flat shape still decode."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

from workflows.task_constants import TaskConstants
from workflows.types import (
    ActivityName,
    BudgetGrant,
    ChatMessage,
    ModelCallInput,
    TranscriptCursor,
    TranscriptView,
)

CONVERTER = pydantic_data_converter.payload_converter
HISTORIES = Path(__file__).parent.parent / "workflow" / "histories"

FLAT = {
    "task_id": "task-1",
    "step": 4,
    "agent_name": "helper",
    "workspace": "acme",
    "channel": "C0DEPLOY",
    "surface": "slack",
    "models": ["openai/gpt-4o-mini"],
    "transcript_upto": 9,
    "new_messages": [ChatMessage("tool", "found it", tool_call_id="call_1", name="memory__search")],
    "tool_names": ["memory.search"],
    "max_tokens": 512,
    "usd_headroom": 0.5,
    "token_headroom": 90_000,
    "on_exceeded": "warn",
    "view": TranscriptView(summary_upto=3),
    "monthly_usd": 20.0,
}
NESTED = ModelCallInput(
    task_id="task-1",
    step=4,
    agent_name="helper",
    workspace="acme",
    channel="C0DEPLOY",
    surface="slack",
    models=["openai/gpt-4o-mini"],
    tool_names=["memory.search"],
    cursor=TranscriptCursor(
        upto=9,
        new_messages=[ChatMessage("tool", "found it", tool_call_id="call_1", name="memory__search")],
        view=TranscriptView(summary_upto=3),
    ),
    budget=BudgetGrant(
        max_tokens=512, usd_headroom=0.5, token_headroom=90_000, on_exceeded="warn", monthly_usd=20.0
    ),
)


def flat_json() -> bytes:
    """The input as the flat dataclass encoded it, None fields and all."""
    values = {
        "on_exceeded": "block",
        "view": {"summary_upto": 0, "keep_tool_results": 6},
        "purpose": "step",
        "timeout_seconds": 120.0,
        "monthly_usd": None,
        "channel_monthly_usd": None,
        "run_first": None,
    } | FLAT
    return json.dumps(values, default=lambda o: o.__dict__).encode()


def test_flat_keywords_and_positions_build_the_grouped_input() -> None:
    assert ModelCallInput(**FLAT) == NESTED
    positional = ModelCallInput(
        *[FLAT[k] for k in ("task_id", "step", "agent_name", "workspace", "channel", "surface", "models")],
        FLAT["transcript_upto"],
        FLAT["new_messages"],
        FLAT["tool_names"],
        512,
        0.5,
        90_000,
        "warn",
        TranscriptView(summary_upto=3),
        monthly_usd=20.0,
    )
    assert positional == NESTED
    assert (NESTED.max_tokens, NESTED.transcript_upto, NESTED.view.summary_upto) == (512, 9, 3)


def test_the_flat_shape_in_history_decodes_and_the_grouped_one_is_smaller() -> None:
    flat = Payload(metadata={"encoding": b"json/plain"}, data=flat_json())
    assert CONVERTER.from_payloads([flat], [ModelCallInput])[0] == NESTED
    [grouped] = CONVERTER.to_payloads([NESTED])
    assert CONVERTER.from_payloads([grouped], [ModelCallInput])[0] == NESTED
    assert len(grouped.data) < len(flat.data)
    assert b'"run_first"' not in grouped.data and b'"channel_monthly_usd"' not in grouped.data


def test_every_model_call_recorded_in_the_committed_histories_decodes() -> None:
    decoded = 0
    for path in sorted(HISTORIES.glob("*.json")):
        for event in json.loads(path.read_text())["events"]:
            attrs = event.get("activityTaskScheduledEventAttributes")
            if not attrs or attrs["activityType"]["name"] != ActivityName.CALL_MODEL:
                continue
            [raw] = attrs["input"]["payloads"]
            payload = Payload(
                metadata={k: base64.b64decode(v) for k, v in raw["metadata"].items()},
                data=base64.b64decode(raw["data"]),
            )
            inp = CONVERTER.from_payloads([payload], [ModelCallInput])[0]
            assert inp.budget.max_tokens >= 0 and inp.cursor.upto >= 0, path.name
            decoded += 1
    assert decoded > 0


# Inputs of a task that stored its constants leave them out --------------------------------

CONSTANTS = TaskConstants(
    agent_name="helper",
    workspace="acme",
    channel="C0DEPLOY",
    surface="slack",
    models=["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5"],
    summary_models=["openai/gpt-4o-mini"],
    tool_names=["memory.search", "memory.save", "github.get_issue"],
    on_exceeded="warn",
    monthly_usd=20.0,
)
LEAN = ModelCallInput(
    task_id="task-1",
    step=4,
    cursor=NESTED.cursor,
    budget=BudgetGrant(max_tokens=512, usd_headroom=0.5, token_headroom=90_000, on_exceeded=None),
    model="openai/gpt-4o-mini",
)


def test_a_lean_input_leaves_the_constants_out_and_reads_them_from_the_row() -> None:
    [payload] = CONVERTER.to_payloads([LEAN])
    for constant in (b"agent_name", b"workspace", b"C0DEPLOY", b"memory.save", b"on_exceeded", b"anthropic"):
        assert constant not in payload.data
    decoded = CONVERTER.from_payloads([payload], [ModelCallInput])[0]
    assert decoded == LEAN and not decoded.carries_constants
    assert decoded.task_or_none() is None  # until the activity attaches the row
    decoded.use_stored(CONSTANTS)
    assert decoded.task.agent_name == "helper" and decoded.on_exceeded == "warn"
    assert decoded.route == CONSTANTS.models and decoded.offered_tools == CONSTANTS.tool_names
    summary = decoded.model_copy(update={"purpose": "summary", "tool_names": []})
    summary.use_stored(CONSTANTS)
    assert summary.route == ["openai/gpt-4o-mini"] and summary.offered_tools == []
    # The same call as an older task sends it carries everything, and is larger.
    [carried] = CONVERTER.to_payloads([decoded.resolved()])
    assert len(payload.data) < len(carried.data) - 150


def test_an_older_input_is_its_own_constants() -> None:
    task = NESTED.task
    assert (task.agent_name, task.channel, task.on_exceeded) == ("helper", "C0DEPLOY", "warn")
    assert task.monthly_usd == 20.0
    assert NESTED.route == ["openai/gpt-4o-mini"] and NESTED.offered_tools == ["memory.search"]
    assert NESTED.resolved() == NESTED
