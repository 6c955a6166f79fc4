"""Tracing on the real dev server: spans nest workflow -> activity and carry model usage."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.worker import Worker

from activities.tools.catalog import specs_for
from config.loader import parse_agent
from tests.workflow.record_histories import HELPER_YAML
from tests.workflow.scripted import Script, say, use
from workers.sandbox import workflow_runner
from workers.telemetry import build_tracer_provider, tracing_interceptors, worker_interceptors
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskInput, TaskResult, TaskStatus

# memory.save runs as its own (local) activity; a read-only search would run inside the
# next model call instead.
SAVE_ARGS = json.dumps({"content": "we deploy on Tuesdays"})
AGENT_YAML = HELPER_YAML.replace(
    '{name: memory.search, permissions: ["memory:read"]}',
    '{name: memory.save, permissions: ["memory:write"]}',
)


def _script() -> Script:
    return Script(
        [
            use("memory.save", SAVE_ARGS, "c1", (150, 20), 0.0003),
            say("Tuesdays.", (210, 15), 0.0004),
        ]
    )


def _input() -> TaskInput:
    agent = parse_agent(AGENT_YAML)
    return TaskInput(
        task_id=f"task-cli-trace-{uuid.uuid4().hex[:10]}",
        agent=agent,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="what did we decide about deploys?",
        tools=specs_for(agent),
    )


async def _run_task(
    starter: Client, worker_client: Client, task_queue: str, provider: TracerProvider
) -> TaskResult:
    inp = _input()
    async with Worker(
        worker_client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=_script().activities(),
        workflow_runner=workflow_runner(),
        interceptors=worker_interceptors(tracer_provider=provider),
    ):
        return await starter.execute_workflow(
            AgentTaskWorkflow.run, inp, id=inp.task_id, task_queue=task_queue
        )


def _traced(client: Client, provider: TracerProvider) -> Client:
    """A client like the surfaces' and the worker's: same server, tracing interceptor on."""
    config = client.config()
    config["interceptors"] = tracing_interceptors(tracer_provider=provider)
    return Client(**config)


def _memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def _parent_name(spans: tuple[ReadableSpan, ...], span: ReadableSpan) -> str | None:
    if span.parent is None:
        return None
    by_id = {s.context.span_id: s.name for s in spans}
    return by_id.get(span.parent.span_id, "<not exported>")


async def test_one_trace_per_task_from_the_start_call_down_to_each_activity(
    client: Client, task_queue: str
) -> None:
    provider, exporter = _memory_provider()
    # The surface that starts the task and the worker that runs it have their own clients.
    result = await _run_task(_traced(client, provider), _traced(client, provider), task_queue, provider)
    assert result.status == TaskStatus.SUCCESS
    spans = exporter.get_finished_spans()

    [start] = _named(spans, "StartWorkflow:openloop.AgentTask")
    assert start.parent is None
    assert {span.context.trace_id for span in spans} == {start.context.trace_id}
    [run] = _named(spans, "RunWorkflow:openloop.AgentTask")
    [complete] = _named(spans, "CompleteWorkflow:openloop.AgentTask")
    assert _parent_name(spans, run) == _parent_name(spans, complete) == start.name
    assert (run.attributes or {})["temporalWorkflowID"] == result.task_id

    # TracingInterceptor hangs the workflow's spans from the start span (replay-safe: it
    # comes from the task's headers), the activities' through the run's agent span (its ids
    # derived from the run id); each activity run is the child of its start.
    [agent] = _named(spans, "invoke_agent helper")
    assert _parent_name(spans, agent) == start.name
    # It lasts the run: from the run's start to its completion.
    assert (agent.start_time or 0) <= (run.start_time or 0)
    assert (agent.end_time or 0) >= (complete.end_time or 0) > (agent.start_time or 0)
    starts = [s for s in spans if s.name.startswith("StartActivity:")]
    assert {s.name for s in starts} >= {
        "StartActivity:openloop.surface.task_started",
        "StartActivity:openloop.memory.recall",
        "StartActivity:openloop.model.call",
        "StartActivity:openloop.tool.run",
        "StartActivity:openloop.surface.post_reply",
    }
    assert all(_parent_name(spans, s) == agent.name for s in starts)
    runs = [s for s in spans if s.name.startswith("RunActivity:")]
    assert len(runs) == len(starts)
    for span in runs:
        assert _parent_name(spans, span) == span.name.replace("RunActivity:", "StartActivity:")
    assert run.start_time is not None and all((s.start_time or 0) >= run.start_time for s in starts)

    # Model, tokens and cost ride on each model call's `chat` span, under its activity's;
    # the tool's name on the tool's `execute_tool` span.
    model_runs = sorted([s for s in spans if s.name.startswith("chat ")], key=lambda s: s.start_time or 0)
    assert len(model_runs) == 2
    assert {_parent_name(spans, s) for s in model_runs} == {"RunActivity:openloop.model.call"}
    attrs = dict(model_runs[0].attributes or {})
    assert attrs["gen_ai.response.model"] == "scripted/model"
    assert attrs["gen_ai.usage.input_tokens"] == 150
    assert attrs["gen_ai.usage.output_tokens"] == 20
    assert attrs["openloop.cost_usd"] == pytest.approx(0.0003)
    assert attrs["openloop.agent"] == "helper" and attrs["openloop.step"] == 1
    assert attrs["openloop.tool_calls"] == 1
    total = sum(float(str((s.attributes or {})["openloop.cost_usd"])) for s in model_runs)
    assert total == pytest.approx(0.0007)
    [tool] = _named(spans, "execute_tool memory.save")
    assert _parent_name(spans, tool) == "RunActivity:openloop.tool.run"
    assert (tool.attributes or {})["gen_ai.tool.name"] == "memory.save"
    assert (tool.attributes or {})["openloop.tool.ok"] is True


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: protobuf ExportTraceServiceRequest on POST /v1/traces."""

    received: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def collector() -> Iterator[str]:
    _Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


async def test_spans_go_to_the_otlp_endpoint_from_the_environment(
    client: Client, task_queue: str, collector: str
) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector, "OTEL_SERVICE_NAME": "ol-test"}
    provider = build_tracer_provider(env)
    assert provider is not None
    await _run_task(_traced(client, provider), _traced(client, provider), task_queue, provider)
    assert provider.force_flush(10_000)
    assert _Collector.received, "nothing reached the collector"
    spans: dict[str, dict[str, object]] = {}
    services = set()
    for path, content_type, body in _Collector.received:
        assert path == "/v1/traces" and content_type == "application/x-protobuf"
        for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
            resource = resource_spans.resource.attributes
            services |= {a.value.string_value for a in resource if a.key == "service.name"}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    spans[span.name] = {a.key: a.value for a in span.attributes}
    provider.shutdown()
    assert services == {"ol-test"}
    assert {"RunWorkflow:openloop.AgentTask", "invoke_agent helper"} <= set(spans)
    [chat] = [name for name in spans if name.startswith("chat ")]
    input_tokens = spans[chat]["gen_ai.usage.input_tokens"]
    assert getattr(input_tokens, "int_value", None) in (150, 210)


def test_spans_go_nowhere_by_default_and_to_the_console_when_asked(
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert build_tracer_provider({}) is None
    assert build_tracer_provider({"OTEL_TRACES_EXPORTER": "none"}) is None
    provider = build_tracer_provider({"OPENLOOP_TRACE_CONSOLE": "1"})
    assert provider is not None
    with provider.get_tracer("t").start_as_current_span("RunActivity:openloop.model.call"):
        pass
    printed = json.loads(capfd.readouterr().out)
    assert printed["name"] == "RunActivity:openloop.model.call"
    assert printed["resource"]["attributes"]["service.name"] == "openloop"


def test_no_tracing_interceptor_when_spans_would_go_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    import workers.telemetry as telemetry

    for name in (
        "OTEL_TRACES_EXPORTER",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OPENLOOP_TRACE_CONSOLE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(telemetry, "_configured", None)
    assert tracing_interceptors() == []  # nothing exported, so nothing made
    exporting = TracerProvider()
    [interceptor] = tracing_interceptors(tracer_provider=exporting)
    assert type(interceptor).__name__ == "TracingInterceptor"
