"""Worker interceptors that make a task readable from the outside, without touching its logic.

- Activities: the model call's model, tokens and cost (and a tool call's tool and outcome)
  become attributes of the current OpenTelemetry span (the `RunActivity:` span when the
  tracing interceptor runs outside this one) and Temporal metrics.
- Workflows: every activity gets a summary that says what it does ("step 3: ask
  gpt-4o-mini", "step 4: run github.create_issue"), so the history in the Web UI reads like a
  story; tasks started and finished (by status) are counted through the workflow's metric
  meter, which records nothing while replaying.

Nothing here issues a workflow command, so adding or removing it never breaks replay.
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry import trace
from temporalio import activity, workflow
from temporalio.exceptions import FailureError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    Interceptor,
    StartActivityInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from activities.store.tool_calls import record_tool_span_attributes
from workflows import activity_options
from workflows.mcp_types import McpCallInput, McpListInput
from workflows.types import (
    WORKFLOW_NAME,
    ActivityName,
    ModelCallInput,
    ModelCallResult,
    PostApprovalRequestInput,
    PostReplyInput,
    ResolveApprovalRequestInput,
    TaskInput,
    TaskResult,
    ToolCallInput,
    ToolCallResult,
)

# Summaries the workflow passes when it has nothing specific to say (the fixed ones in
# workflows.activity_options): replaced by ours, which say which step, model or tool.
_GENERIC_SUMMARIES = {
    value.get("summary")
    for name, value in vars(activity_options).items()
    if name.endswith("_OPTIONS") and isinstance(value, dict)
} | {None, ""}

TASKS_STARTED = "openloop_tasks_started"
TASKS_FINISHED = "openloop_tasks_finished"
MODEL_TOKENS = "openloop_model_tokens"
MODEL_COST_USD = "openloop_model_cost_usd"
TOOL_CALLS = "openloop_tool_calls"


class TaskTelemetryInterceptor(Interceptor):
    """Span attributes, metrics and history summaries for OpenLoop tasks."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityInbound(next)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _WorkflowInbound


class _ActivityInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        result = await super().execute_activity(input)
        arg = input.args[0] if input.args else None
        if isinstance(result, ModelCallResult) and isinstance(arg, ModelCallInput):
            record_model_span_attributes(trace.get_current_span(), arg, result)
            task = arg.task_or_none()
            labels = {"model": result.usage.model, "agent": task.agent_name if task else ""}
            meter = activity.metric_meter()
            tokens = meter.create_counter(MODEL_TOKENS, "Model tokens used", "tokens")
            tokens.add(result.usage.prompt_tokens, {**labels, "kind": "prompt"})
            tokens.add(result.usage.completion_tokens, {**labels, "kind": "completion"})
            meter.create_histogram_float(MODEL_COST_USD, "Cost of model calls", "USD").record(
                result.usage.cost_usd, labels
            )
            # Tool calls folded into the model call ran in it.
            folded = arg.folded_calls
            for call, outcome in zip(folded, result.tool_results, strict=False):
                _count_tool_call(call.tool, outcome)
        elif isinstance(result, ToolCallResult) and isinstance(arg, ToolCallInput):
            record_tool_span_attributes(trace.get_current_span(), arg, result)
            _count_tool_call(arg.tool, result)
        return result


def record_model_span_attributes(span: trace.Span, inp: ModelCallInput, result: ModelCallResult) -> None:
    """Model, tokens and cost of one model call on `span` (GenAI semantic convention names)."""
    if not span.is_recording():
        return
    span.set_attributes(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": inp.model or "",  # the route's first
            "gen_ai.response.model": result.usage.model,
            "gen_ai.request.max_tokens": inp.max_tokens,
            "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": result.usage.completion_tokens,
            "gen_ai.response.finish_reasons": [result.finish_reason],
            "openloop.cost_usd": result.usage.cost_usd,
            "openloop.task_id": inp.task_id,
            "openloop.step": inp.step,
            "openloop.agent": task.agent_name if (task := inp.task_or_none()) else "",
            "openloop.purpose": inp.purpose,
            "openloop.tool_calls": len(result.tool_calls),
            "openloop.offline": result.offline,
        }
    )


def _count_tool_call(tool: str, result: ToolCallResult) -> None:
    activity.metric_meter().create_counter(TOOL_CALLS, "Tool calls run").add(
        1, {"tool": tool, "outcome": "ok" if result.ok else (result.error_kind or "failed")}
    )


class _WorkflowInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_WorkflowOutbound(outbound))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        task = input.args[0] if input.args else None
        if workflow.info().workflow_type != WORKFLOW_NAME or not isinstance(task, TaskInput):
            return await super().execute_workflow(input)
        labels = {"agent": task.agent.name, "surface": task.context.surface}
        meter = workflow.metric_meter()
        if task.carried is None:  # a continued run is the same task
            meter.create_counter(TASKS_STARTED, "Agent tasks started").add(1, labels)
        finished = meter.create_counter(TASKS_FINISHED, "Agent tasks finished, by status")
        try:
            result = await super().execute_workflow(input)
        except asyncio.CancelledError:
            finished.add(1, {**labels, "status": "CANCELLED"})
            raise
        except FailureError:
            finished.add(1, {**labels, "status": "ERROR"})
            raise
        if isinstance(result, TaskResult):
            finished.add(1, {**labels, "status": result.status.value})
        return result


class _WorkflowOutbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        if input.summary in _GENERIC_SUMMARIES:
            input.summary = activity_summary(input.activity, input.args) or input.summary
        return super().start_activity(input)

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        if input.summary in _GENERIC_SUMMARIES:
            input.summary = activity_summary(input.activity, input.args) or input.summary
        return super().start_local_activity(input)


def activity_summary(name: str, args: Any) -> str | None:
    """One line saying what an activity is about to do, for the Web UI's event history."""
    arg = args[0] if args else None
    if isinstance(arg, ModelCallInput):
        model = arg.model or "the model"
        what = {"summary": "summarise the conversation with", "final": "write the final answer with"}
        # Tool calls folded into this call run first; say so, as their own activity would.
        tools = ", ".join(call.tool for call in arg.folded_calls)
        first = f"run {tools}, then " if tools else ""
        return f"step {arg.step}: {first}{what.get(arg.purpose, 'ask')} {model}"
    if isinstance(arg, McpCallInput):
        arg = arg.call  # said like a native tool's call
    if isinstance(arg, ToolCallInput):
        approved = f", approved by {arg.approval.approver}" if arg.approval else ""
        return f"step {arg.step}: run {arg.tool}{approved}"
    if isinstance(arg, McpListInput):
        return f"list the tools of MCP servers {', '.join(server.name for server in arg.servers)}"
    if isinstance(arg, PostApprovalRequestInput):
        approvers = ", ".join(arg.request.approvers) or "an approver"
        return f"ask {approvers} to approve {arg.request.tool}"
    if isinstance(arg, ResolveApprovalRequestInput):
        by = f" by {arg.decided_by}" if arg.decided_by else ""
        return f"{arg.request.tool}: {arg.outcome}{by}"
    if isinstance(arg, PostReplyInput):
        if name == ActivityName.TASK_STARTED:
            return f"tell {arg.context.surface} {arg.context.channel} the task started"
        return f"reply on {arg.context.surface} {arg.context.channel} ({arg.status.value})"
    if name == ActivityName.RECALL:
        return "recall memory"
    if name == ActivityName.RECORD_AUDIT:
        kind = getattr(arg, "kind", "")
        return f"audit {kind}".strip()
    return None
