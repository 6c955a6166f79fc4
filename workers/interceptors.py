"""Worker interceptors that make a task readable from the outside, without touching its logic.

- Activities: a model call runs in a `chat {model}` span and a tool call in an
  `execute_tool {tool}` span (OpenTelemetry GenAI conventions, `activities.genai_spans`),
  under the `RunActivity:` span when the tracing interceptor runs outside this one; model
  tokens and cost and tool outcomes are counted in Temporal metrics too.
- Workflows: each run of a task is an `invoke_agent {agent}` span with the run's activity
  spans under it (`workers.agent_span`).
- Every activity gets a summary that says what it does ("step 3: ask
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

from activities import genai_spans
from activities.genai_spans import GenAiTracing
from workers.agent_span import AgentRunScope, AgentSpanMaker
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
    TaskStatus,
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
    """Spans, metrics and history summaries for OpenLoop tasks.

    GenAI spans (`invoke_agent`, `chat`, `execute_tool`) go to `tracer_provider`, the
    process-wide one if None; message content rides on them only with `capture_content`.
    """

    def __init__(
        self, tracer_provider: trace.TracerProvider | None = None, *, capture_content: bool = False
    ) -> None:
        self._provider = tracer_provider
        self._capture_content = capture_content
        self._agent_spans = AgentSpanMaker(tracer_provider)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        tracing = GenAiTracing(genai_spans.tracer_for(self._provider), self._capture_content)
        return _ActivityInbound(next, tracing)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        input.unsafe_extern_functions.update(self._agent_spans.extern_functions())
        return _WorkflowInbound


class _ActivityInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, tracing: GenAiTracing) -> None:
        super().__init__(next)
        self._tracing = tracing

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        arg = input.args[0] if input.args else None
        with genai_spans.using(self._tracing):
            if isinstance(arg, ModelCallInput):
                return await self._model_call(input, arg)
            call = arg.call if isinstance(arg, McpCallInput) else arg
            if isinstance(call, ToolCallInput):
                with genai_spans.tool_span(call) as span:
                    result = await super().execute_activity(input)
                    if isinstance(result, ToolCallResult):
                        genai_spans.end_tool_span(span, call, result)
                        if not isinstance(arg, McpCallInput):  # MCP calls: not counted here (as before)
                            _count_tool_call(call.tool, result)
                return result
            return await super().execute_activity(input)

    async def _model_call(self, input: ExecuteActivityInput, arg: ModelCallInput) -> Any:
        with self._tracing.tracer.start_as_current_span(
            f"chat {arg.model or ''}".strip(),
            kind=trace.SpanKind.CLIENT,
            attributes=genai_spans.chat_request_attributes(arg),
        ) as span:
            try:
                result = await super().execute_activity(input)
            except Exception as err:
                span.set_attribute("error.type", type(err).__name__)
                raise
            if not isinstance(result, ModelCallResult):
                return result
            span.set_attributes(
                genai_spans.chat_response_attributes(arg, result, self._tracing.capture_content)
            )
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
        for call, outcome in zip(arg.folded_calls, result.tool_results, strict=False):
            _count_tool_call(call.tool, outcome)
        return result


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
        span = AgentRunScope.begin(task)
        try:
            result = await super().execute_workflow(input)
        except asyncio.CancelledError:
            finished.add(1, {**labels, "status": "CANCELLED"})
            if span:
                span.end("CANCELLED", error="cancelled")
            raise
        except FailureError as err:
            finished.add(1, {**labels, "status": "ERROR"})
            if span:
                span.end("ERROR", error=type(err).__name__)
            raise
        except workflow.ContinueAsNewError:
            if span:
                span.end("CONTINUED_AS_NEW")
            raise
        if isinstance(result, TaskResult):
            finished.add(1, {**labels, "status": result.status.value})
            if span:
                failed = "task_error" if result.status == TaskStatus.ERROR else ""
                span.end(result.status.value, result, error=failed)
        elif span:
            span.end("UNKNOWN")
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
