"""ModelCallInput carries only what differs between a task's calls; the activity attaches the
task's stored constants, and every committed history's model calls decode."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

from workflows.task_constants import TaskConstants
from workflows.types import (
    ActivityName,
    BudgetGrant,
    ChatMessage,
    FoldedToolCall,
    MemoryScopeRef,
    ModelCallInput,
    SurfaceContext,
    TranscriptCursor,
    TranscriptView,
)

CONVERTER = pydantic_data_converter.payload_converter
HISTORIES = Path(__file__).parent.parent / "workflow" / "histories"

CONTEXT = SurfaceContext(surface="slack", channel="C0DEPLOY", user="U_BOB")
SCOPE = MemoryScopeRef("acme", "helper", "channel", "slack:C0DEPLOY", "offline/hashing-256", 30)
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
    context=CONTEXT,
    memory=SCOPE,
)
LEAN = ModelCallInput(
    task_id="task-1",
    step=4,
    cursor=TranscriptCursor(
        upto=9,
        new_messages=[ChatMessage("tool", "found it", tool_call_id="call_1", name="memory__search")],
        view=TranscriptView(summary_upto=3),
    ),
    budget=BudgetGrant(max_tokens=512, usd_headroom=0.5, token_headroom=90_000),
    model="openai/gpt-4o-mini",
)


def test_the_input_leaves_the_constants_out_and_reads_them_from_the_row() -> None:
    [payload] = CONVERTER.to_payloads([LEAN])
    for constant in (b"agent_name", b"workspace", b"C0DEPLOY", b"memory.save", b"on_exceeded", b"anthropic"):
        assert constant not in payload.data
    assert b'"fold"' not in payload.data and b'"tool_names"' not in payload.data  # None is left out
    decoded = CONVERTER.from_payloads([payload], [ModelCallInput])[0]
    assert decoded == LEAN
    assert decoded.task_or_none() is None  # until the activity attaches the row
    with pytest.raises(LookupError, match="task-1"):
        _ = decoded.route
    decoded.use_stored(CONSTANTS)
    assert decoded.task.agent_name == "helper" and decoded.on_exceeded == "warn"
    assert decoded.monthly_usd == 20.0 and decoded.channel_monthly_usd is None
    assert decoded.route == CONSTANTS.models and decoded.offered_tools == CONSTANTS.tool_names
    assert (decoded.max_tokens, decoded.transcript_upto, decoded.view.summary_upto) == (512, 9, 3)


def test_a_summary_routes_to_the_summary_models_and_a_final_call_offers_no_tools() -> None:
    summary = LEAN.model_copy(update={"purpose": "summary", "tool_names": []})
    summary.use_stored(CONSTANTS)
    assert summary.route == ["openai/gpt-4o-mini"] and summary.offered_tools == []


def test_folded_calls_act_where_the_row_says() -> None:
    folded = LEAN.model_copy(
        update={"fold": [FoldedToolCall(3, "k1", "memory.search", {"query": "deploys"})]}
    )
    [payload] = CONVERTER.to_payloads([folded])
    decoded = CONVERTER.from_payloads([payload], [ModelCallInput])[0]
    decoded.use_stored(CONSTANTS)
    [call] = decoded.folded_inputs()
    assert (call.tool, call.context, call.memory, call.step) == ("memory.search", CONTEXT, SCOPE, 3)
    without_context = LEAN.model_copy(update={"fold": folded.fold})
    without_context.use_stored(TaskConstants("helper", "acme", "C0DEPLOY", "slack", [], [], []))
    with pytest.raises(LookupError, match="no stored context"):
        without_context.folded_inputs()


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
            assert inp.model, path.name  # every call names its first model for the Web UI
            decoded += 1
    assert decoded > 0
