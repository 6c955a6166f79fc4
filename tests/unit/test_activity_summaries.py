"""The one-line summaries the Web UI shows for each activity in a task's history."""

from __future__ import annotations

from typing import Any

from config.mcp import McpServer
from workers.interceptors import activity_summary
from workflows.mcp_types import McpCallInput, McpListInput
from workflows.types import (
    ActivityName,
    ApprovalRecord,
    BudgetGrant,
    FoldedToolCall,
    MemoryScopeRef,
    ModelCallInput,
    SurfaceContext,
    ToolCallInput,
    TranscriptCursor,
)

CONTEXT = SurfaceContext(surface="slack", channel="C0DEPLOY", user="U_BOB")
SCOPE = MemoryScopeRef("acme", "helper", "channel", "slack:C0DEPLOY", "offline/hashing-256", 30)


def call_input(step: int, **overrides: Any) -> ModelCallInput:
    values: dict[str, Any] = {
        "task_id": "task-1",
        "step": step,
        "cursor": TranscriptCursor(0),
        "budget": BudgetGrant(512, 1.0, 100_000),
        "model": "openai/gpt-4o-mini",
    }
    return ModelCallInput(**(values | overrides))


def test_a_model_call_names_its_step_its_model_and_the_tools_run_inside_it() -> None:
    plain = call_input(3)
    assert activity_summary(ActivityName.CALL_MODEL, [plain]) == "step 3: ask openai/gpt-4o-mini"
    folded = call_input(
        4,
        fold=[
            FoldedToolCall(3, "c1", "memory.search", {"query": "deploys"}),
            FoldedToolCall(3, "c2", "memory.search", {"query": "rollbacks"}),
        ],
    )
    assert activity_summary(ActivityName.CALL_MODEL, [folded]) == (
        "step 4: run memory.search, memory.search, then ask openai/gpt-4o-mini"
    )
    summary = call_input(5, purpose="summary")
    assert activity_summary(ActivityName.CALL_MODEL, [summary]) == (
        "step 5: summarise the conversation with openai/gpt-4o-mini"
    )
    unnamed = call_input(6, model=None)
    assert activity_summary(ActivityName.CALL_MODEL, [unnamed]) == "step 6: ask the model"


def test_a_tool_call_names_its_approver() -> None:
    approved = ToolCallInput.for_call(
        "task-1",
        2,
        "c1",
        "github.create_issue",
        {"repo": "acme/web", "title": "Flaky"},
        CONTEXT,
        SCOPE,
        ApprovalRecord("req-1", "act-1", "U_ALICE", "2026-11-22T10:00:00+00:00"),
    )
    assert activity_summary(ActivityName.RUN_TOOL, [approved]) == (
        "step 2: run github.create_issue, approved by U_ALICE"
    )
    assert approved.idempotency_key == "task-1:2:c1" and approved.requested_by == "U_BOB"


def test_mcp_calls_and_listing_read_like_native_tools() -> None:
    server = McpServer(name="notes", transport="stdio", command=["notes-server"], allow=["create_note"])
    call = ToolCallInput.for_call(
        "task-1",
        3,
        "k",
        "notes.create_note",
        {"title": "x"},
        CONTEXT,
        SCOPE,
        ApprovalRecord("req-1", "act-1", "U_ALICE", "2026-11-22T10:00:00+00:00"),
    )
    summary = activity_summary(ActivityName.MCP_CALL_TOOL, [McpCallInput(call, server, "create_note", "sha")])
    assert summary == "step 3: run notes.create_note, approved by U_ALICE"
    listing = activity_summary(ActivityName.MCP_LIST_TOOLS, [McpListInput("task-1", [server])])
    assert listing == "list the tools of MCP servers notes"
