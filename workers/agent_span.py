"""The `invoke_agent {agent}` span of a task (OpenTelemetry GenAI conventions, see
`activities.genai_spans`): one per workflow run, lasting the run, with the run's model
and tool spans under it.

Workflow code cannot hold a span open (a replay would open it again), so the span is made
when the run ends, outside the sandbox (an extern function, as temporalio's tracing
interceptor makes its own), with the run's start time. Its ids are derived from the run id,
so the workflow puts it on its context from the start — activities scheduled afterwards, on
this worker or on another after a restart, name it as their parent — and the worker then
makes the span with exactly those ids (`workers.span_ids`). Only span context changes in the
workflow: no command, so replay is unaffected whether tracing is on or off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.util.types import AttributeValue
from temporalio import workflow

from activities.genai_spans import SCHEMA_URL
from workers.span_ids import PinnableIds, pinned, run_span_ids
from workflows.types import TaskInput, TaskResult

AGENT_SPAN_ON = "__openloop_invoke_agent_span_on"
AGENT_SPAN = "__openloop_invoke_agent_span"
# A scope of its own: a provider keeps one tracer per scope, with the id generator it had
# then, and this scope's tracer is first asked for once the ids are pinnable.
AGENT_TRACER_NAME = "openloop.invoke_agent"


@dataclass(frozen=True)
class AgentRunSpan:
    """What the workflow hands the worker to make the span with."""

    name: str
    trace_id: int
    span_id: int
    parent_span_id: int  # 0: the run has no parent span (a client without tracing)
    sampled: bool
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    error: str = ""


class AgentSpanMaker:
    """Worker side: makes a run's agent span on `provider` (the process-wide one if None)."""

    def __init__(self, provider: trace.TracerProvider | None = None) -> None:
        self._provider = provider

    def _sdk(self) -> SdkTracerProvider | None:
        provider = self._provider or trace.get_tracer_provider()
        return provider if isinstance(provider, SdkTracerProvider) else None

    def on(self) -> bool:
        return self._sdk() is not None

    def make(self, run: AgentRunSpan) -> None:
        provider = self._sdk()
        if provider is None:
            return
        if not isinstance(provider.id_generator, PinnableIds):
            provider.id_generator = PinnableIds(provider.id_generator)  # tracers made from now on
        parent = otel_context.Context()
        if run.parent_span_id:
            flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if run.sampled else trace.TraceFlags.DEFAULT)
            remote = trace.SpanContext(run.trace_id, run.parent_span_id, is_remote=True, trace_flags=flags)
            parent = trace.set_span_in_context(trace.NonRecordingSpan(remote))
        with pinned(run.trace_id, run.span_id):
            span = provider.get_tracer(AGENT_TRACER_NAME, schema_url=SCHEMA_URL).start_span(
                run.name,
                parent,
                kind=trace.SpanKind.INTERNAL,
                attributes=run.attributes,
                start_time=run.start_ns,
            )
        if run.error:
            span.set_attribute("error.type", run.error)
            span.set_status(trace.Status(trace.StatusCode.ERROR, run.error))
        span.end(end_time=run.end_ns)

    def extern_functions(self) -> dict[str, Callable[..., object]]:
        return {AGENT_SPAN_ON: self.on, AGENT_SPAN: self.make}


def agent_attributes(task: TaskInput) -> dict[str, AttributeValue]:
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": task.agent.name,
        "gen_ai.agent.id": f"{task.agent.workspace}/{task.agent.name}",
        "gen_ai.agent.version": str(task.agent_version),
        "gen_ai.conversation.id": task.task_id,
        "openloop.task_id": task.task_id,
        "openloop.surface": task.context.surface,
        "openloop.task_kind": task.task_kind,
    }


class AgentRunScope:
    """Workflow side: the run's agent span on the context from `begin`, made at `end`."""

    def __init__(self, task: TaskInput, make: Callable[[AgentRunSpan], object]) -> None:
        info = workflow.info()
        parent = trace.get_current_span().get_span_context()
        own_trace, self._span_id = run_span_ids(info.run_id)
        self._trace_id = parent.trace_id if parent.is_valid else own_trace
        self._parent_span_id = parent.span_id if parent.is_valid else 0
        self._sampled = parent.trace_flags.sampled if parent.is_valid else True
        self._task = task
        self._make = make
        self._start_ns = int(info.workflow_start_time.timestamp() * 1e9)
        flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if self._sampled else trace.TraceFlags.DEFAULT)
        mine = trace.SpanContext(self._trace_id, self._span_id, is_remote=False, trace_flags=flags)
        self._token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(mine)))

    @classmethod
    def begin(cls, task: TaskInput) -> AgentRunScope | None:
        """None when the worker makes no spans (no tracer provider set up)."""
        externs = workflow.extern_functions()
        on, make = externs.get(AGENT_SPAN_ON), externs.get(AGENT_SPAN)
        if on is None or make is None or not on():
            return None
        return cls(task, make)

    def end(self, status: str, result: TaskResult | None = None, error: str = "") -> None:
        otel_context.detach(self._token)
        if workflow.unsafe.is_replaying():
            return  # made when the run first ended
        attributes = {**agent_attributes(self._task), "openloop.task.status": status}
        if result is not None:
            attributes["openloop.cost_usd"] = result.usage.cost_usd
            attributes["openloop.steps"] = result.steps
        self._make(
            AgentRunSpan(
                name=f"invoke_agent {self._task.agent.name}",
                trace_id=self._trace_id,
                span_id=self._span_id,
                parent_span_id=self._parent_span_id,
                sampled=self._sampled,
                start_ns=self._start_ns,
                end_ns=workflow.time_ns(),
                attributes=attributes,
                error=error,
            )
        )
