"""Stand-ins registered under the real activity names, so the real workflow runs on a real
Temporal server with a scripted model and recorded tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.exceptions import ApplicationError

from workflows.mcp_types import McpCallInput, McpListInput, McpListResult, McpServerStatus
from workflows.message_types import PrepareApprovalInput, PrepareApprovalResult
from workflows.skill_tools import SkillLoadInput
from workflows.task_constants import SAVE_TASK_CONSTANTS, SaveTaskConstantsInput, TaskConstants
from workflows.tool_catalog import ToolSpec
from workflows.types import (
    ActivityName,
    AuditEvent,
    MemoryItem,
    ModelCallInput,
    ModelCallResult,
    ModelUsage,
    PostApprovalRequestInput,
    PostApprovalRequestResult,
    PostReplyInput,
    RecallInput,
    RecallResult,
    ResolveApprovalRequestInput,
    ToolCall,
    ToolCallInput,
    ToolCallResult,
)


def say(
    text: str, tokens: tuple[int, int] = (100, 20), cost: float = 0.0, finish: str = "stop"
) -> ModelCallResult:
    return ModelCallResult(text, [], finish, ModelUsage("scripted/model", *tokens, cost), 0, 0)


def use(
    tool: str,
    arguments: str,
    call_id: str = "c1",
    tokens: tuple[int, int] = (100, 20),
    cost: float = 0.0,
) -> ModelCallResult:
    return ModelCallResult(
        "",
        [ToolCall(call_id, tool.replace(".", "__"), arguments)],
        "tool_calls",
        ModelUsage("scripted/model", *tokens, cost),
        0,
        0,
    )


STORED_CONSTANTS: dict[str, TaskConstants] = {}


@dataclass
class Script:
    """A sequence of model answers; when it runs out, `default` answers every further call."""

    answers: list[ModelCallResult]
    default: Callable[[ModelCallInput], ModelCallResult] | None = None
    # As history holds them, with the task's row attached (`task`, `route`, `offered_tools`).
    model_inputs: list[ModelCallInput] = field(default_factory=list)
    # The task_constants rows: shared by every script, as the table is by every worker, so a
    # task handed to a fresh worker (with a script of its own) still finds its row.
    constants: dict[str, TaskConstants] = field(default_factory=lambda: STORED_CONSTANTS)
    tool_calls: list[ToolCallInput] = field(default_factory=list)
    replies: list[PostReplyInput] = field(default_factory=list)
    approval_requests: list[PostApprovalRequestInput] = field(default_factory=list)
    resolutions: list[ResolveApprovalRequestInput] = field(default_factory=list)
    audits: list[AuditEvent] = field(default_factory=list)
    tool_output: Callable[[ToolCallInput], str] = lambda inp: f"done {inp.tool}"
    tool_delay_seconds: float = 0.0  # real time each tool call takes
    memories: list[MemoryItem] = field(default_factory=list)  # what recall finds
    mcp_specs: list[ToolSpec] = field(default_factory=list)  # what the MCP servers list
    mcp_calls: list[McpCallInput] = field(default_factory=list)
    skill_reads: list[SkillLoadInput] = field(default_factory=list)
    reply_error: str | None = None  # post_reply fails with this (non-retryable)

    def activities(self) -> list[Any]:
        script = self

        @activity.defn(name=ActivityName.CALL_MODEL)
        async def call_model(inp: ModelCallInput) -> ModelCallResult:
            # The task's row fills in what the input leaves out, as in the real activity.
            inp.use_stored(script.constants.get(inp.task_id))
            script.model_inputs.append(inp)
            index = len(script.model_inputs) - 1
            if index < len(script.answers):
                answer = script.answers[index]
            else:
                assert script.default is not None, "the script ran out of answers"
                answer = script.default(inp)
            # Folded tool calls run first, as in the real model activity.
            folded = inp.folded_inputs()
            results = [await run_tool(call) for call in folded]
            return replace(
                answer,
                transcript_upto=inp.transcript_upto + len(folded) + len(inp.new_messages) + 1,
                max_tokens_used=inp.max_tokens,
                tool_results=results,
            )

        @activity.defn(name=SAVE_TASK_CONSTANTS)
        async def save_task_constants(inp: SaveTaskConstantsInput) -> None:
            script.constants[inp.task_id] = inp.constants

        @activity.defn(name=ActivityName.RUN_TOOL)
        async def run_tool(inp: ToolCallInput) -> ToolCallResult:
            script.tool_calls.append(inp)
            await asyncio.sleep(script.tool_delay_seconds)
            return ToolCallResult(ok=True, output=script.tool_output(inp))

        @activity.defn(name=ActivityName.RECALL)
        async def recall(inp: RecallInput) -> RecallResult:
            return RecallResult(items=list(script.memories))

        @activity.defn(name=ActivityName.RECORD_AUDIT)
        async def record_audit(inp: AuditEvent) -> None:
            script.audits.append(inp)

        @activity.defn(name=ActivityName.TASK_STARTED)
        async def task_started(inp: PostReplyInput) -> None:
            return None

        @activity.defn(name=ActivityName.POST_REPLY)
        async def post_reply(inp: PostReplyInput) -> None:
            if script.reply_error is not None:
                raise ApplicationError(script.reply_error, non_retryable=True)
            script.replies.append(inp)

        @activity.defn(name=ActivityName.POST_APPROVAL_REQUEST)
        async def post_approval_request(inp: PostApprovalRequestInput) -> PostApprovalRequestResult:
            script.approval_requests.append(inp)
            return PostApprovalRequestResult(message_ref="C1:1.0")

        @activity.defn(name=ActivityName.RESOLVE_APPROVAL_REQUEST)
        async def resolve(inp: ResolveApprovalRequestInput) -> None:
            script.resolutions.append(inp)

        @activity.defn(name=ActivityName.PREPARE_APPROVAL)
        async def prepare_approval(inp: PrepareApprovalInput) -> PrepareApprovalResult:
            return PrepareApprovalResult(list(inp.approvers), 0.0)  # ids listed as is; no cost

        @activity.defn(name=ActivityName.MCP_LIST_TOOLS)
        async def list_mcp_tools(inp: McpListInput) -> McpListResult:
            names = {server.name for server in inp.servers}
            specs = [spec for spec in script.mcp_specs if spec.mcp_server in names]
            statuses = [
                McpServerStatus(name, ok=True, tools=sum(s.mcp_server == name for s in specs))
                for name in sorted(names)
            ]
            return McpListResult(specs, statuses)

        @activity.defn(name=ActivityName.MCP_CALL_TOOL)
        async def call_mcp_tool(inp: McpCallInput) -> ToolCallResult:
            script.mcp_calls.append(inp)
            return ToolCallResult(ok=True, output=script.tool_output(inp.call))

        # The model first: tests swap in the real one with `activities()[1:]`.
        @activity.defn(name=ActivityName.SKILL_LOAD)
        async def load_skill(inp: SkillLoadInput) -> ToolCallResult:
            script.skill_reads.append(inp)
            return ToolCallResult(ok=True, output=f"# Skill: {inp.skill.name} ({inp.path or 'body'})")

        # The model and the constants' writer first: tests that run the real model (which reads
        # the task's row from Postgres) swap in both real ones with `activities()[2:]`.
        return [
            call_model,
            save_task_constants,
            run_tool,
            recall,
            record_audit,
            task_started,
            post_reply,
            post_approval_request,
            resolve,
            prepare_approval,
            list_mcp_tools,
            call_mcp_tool,
            load_skill,
        ]


_ACTIVITY_CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}
_WORKFLOW_TASK_CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
}


async def has_open_work(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the task has an activity or workflow task scheduled and not yet closed."""
    open_activities: set[int] = set()
    workflow_task_open = False
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            open_activities.add(event.event_id)
        elif event.event_type in _ACTIVITY_CLOSED:
            attributes = getattr(event, _ACTIVITY_CLOSED[event.event_type])
            open_activities.discard(attributes.scheduled_event_id)
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            workflow_task_open = True
        elif event.event_type in _WORKFLOW_TASK_CLOSED:
            workflow_task_open = False
    return workflow_task_open or bool(open_activities)


async def wait_until_idle(handle: WorkflowHandle[Any, Any]) -> None:
    """Wait until the task is parked on a timer or a signal with nothing in flight.

    The time-skipping server holds its clock while any activity or workflow task is open, so a
    test that stops its worker and then skips days must let the task settle first.
    """
    for _ in range(200):
        if not await has_open_work(handle):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the task still has work in flight after 10 s")
