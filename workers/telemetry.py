"""OpenTelemetry tracing and Temporal metrics for the worker, configured by the standard env.

Tracing: spans around workflows and activities come from temporalio's `TracingInterceptor`
on the client (`StartWorkflow:` is the root; `RunWorkflow:`, `StartActivity:` and
`CompleteWorkflow:` are its children, each `RunActivity:` a child of its `StartActivity:`);
`worker_interceptors()` adds OpenTelemetry GenAI spans (semantic conventions v1.41.0): an
`invoke_agent {agent}` span per task run, with a `chat {model}` span per model call and an
`execute_tool {tool}` span per tool call under it (`activities.genai_spans`); message
content is on them only with OPENLOOP_TRACE_MESSAGE_CONTENT=1, masked.
Where spans go follows the OpenTelemetry env: `OTEL_TRACES_EXPORTER` (otlp, console, none),
else OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set, else nowhere.
`openloop up --trace-console` (OPENLOOP_TRACE_CONSOLE=1) prints them.

Metrics: Temporal's own runtime exports its metrics plus ours (tasks started/finished by
status, model tokens and cost): a Prometheus endpoint at `OPENLOOP_METRICS_ADDRESS`
(host:port), or OTLP to the OTel endpoint. The runtime must be installed before the first
client connects.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Interceptor

from config.settings import Settings
from workers.span_ids import PinnableIds

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "openloop"
TRACER_NAME = "openloop"

_configured: TracerProvider | None = None


def _env(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip()


def _otlp_span_exporter(env: Mapping[str, str]) -> SpanExporter | None:
    """The OTLP exporter for the configured protocol, or None when its package is missing."""
    protocol = _env(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or _env(env, "OTEL_EXPORTER_OTLP_PROTOCOL")
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
    except ImportError:
        package = "grpc" if protocol == "grpc" else "http"
        log.warning(
            "OTLP tracing is configured but its exporter is not installed: "
            "pip install opentelemetry-exporter-otlp-proto-%s; spans are not exported",
            package,
        )
        return None
    endpoint = _env(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = _env(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint and base:
        endpoint = base if protocol == "grpc" else base.rstrip("/") + "/v1/traces"
    headers = _headers(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS") or _headers(
        env, "OTEL_EXPORTER_OTLP_HEADERS"
    )
    return OTLPSpanExporter(endpoint=endpoint or None, headers=headers or None)


def _headers(env: Mapping[str, str], name: str) -> dict[str, str]:
    """`key=value,key2=value2`, as the OTLP exporter env variables spell headers; values are
    URL-encoded there (`Authorization=Basic%20…`, as Langfuse's instructions give it)."""
    pairs = (pair.split("=", 1) for pair in _env(env, name).split(",") if "=" in pair)
    return {key.strip(): unquote(value.strip()) for key, value in pairs}


def trace_exporter_names(env: Mapping[str, str], console: bool = False) -> list[str]:
    """Which exporters the environment asks for (OTLP only when an endpoint is set)."""
    named = [n.strip() for n in _env(env, "OTEL_TRACES_EXPORTER").split(",") if n.strip()]
    if not named:
        endpoint = _env(env, "OTEL_EXPORTER_OTLP_ENDPOINT") or _env(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        named = ["otlp"] if endpoint else []
    names = [n for n in named if n in ("otlp", "console")]
    # `openloop up --trace-console` sets OPENLOOP_TRACE_CONSOLE for the worker it starts.
    console = console or _env(env, "OPENLOOP_TRACE_CONSOLE").lower() in ("1", "true", "yes")
    if console and "console" not in names:
        names.append("console")
    return names


def build_tracer_provider(
    env: Mapping[str, str] | None = None,
    *,
    console: bool = False,
    settings: Settings | None = None,
) -> TracerProvider | None:
    """A TracerProvider exporting where the env says, or None when spans go nowhere."""
    env = os.environ if env is None else env
    exporters: list[tuple[SpanExporter, bool]] = []  # (exporter, print at once)
    for name in trace_exporter_names(env, console):
        if name == "console":
            exporters.append((ConsoleSpanExporter(out=sys.stdout), True))
        elif (otlp := _otlp_span_exporter(env)) is not None:
            exporters.append((otlp, False))
    if not exporters:
        return None
    attributes: dict[str, Any] = {SERVICE_NAME: _env(env, "OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME}
    if settings is not None:
        attributes["openloop.namespace"] = settings.namespace
        attributes["openloop.task_queue"] = settings.task_queue
    # Pinnable ids: a task run's agent span is made with the ids its workflow derived.
    provider = TracerProvider(resource=Resource.create(attributes), id_generator=PinnableIds())
    for exporter, immediate in exporters:
        processor = SimpleSpanProcessor(exporter) if immediate else BatchSpanProcessor(exporter)
        provider.add_span_processor(processor)
    return provider


def configure_tracing(settings: Settings | None = None, *, console: bool = False) -> TracerProvider | None:
    """Install the process-wide TracerProvider from the env, once; later calls return it."""
    global _configured
    if _configured is None:
        _configured = build_tracer_provider(console=console, settings=settings)
        if _configured is not None:
            trace.set_tracer_provider(_configured)
    return _configured


def tracing_interceptors(
    settings: Settings | None = None,
    *,
    console: bool = False,
    tracer_provider: trace.TracerProvider | None = None,
) -> list[TracingInterceptor]:
    """Temporal's tracing interceptor, for `Client.connect(interceptors=...)`.

    On the client, starting a task opens a `StartWorkflow:` span that the workflow and every
    activity of the task hang from (the trace context rides in Temporal headers, so it
    survives worker restarts and replays); workers built on that client trace through the
    same interceptor, so do not pass it to the worker as well. Pass `tracer_provider` to
    export somewhere of your own (tests); otherwise the env decides (`configure_tracing`),
    and with no exporter configured there is no interceptor at all.
    """
    provider = tracer_provider or configure_tracing(settings, console=console)
    if provider is None:
        # Spans would go nowhere; making them still cost ~4 ms of every activity round trip.
        return []
    # A task started by a client without tracing still gets workflow spans (as roots).
    return [TracingInterceptor(provider.get_tracer(TRACER_NAME), always_create_workflow_spans=True)]


def worker_interceptors(
    settings: Settings | None = None, *, tracer_provider: trace.TracerProvider | None = None
) -> list[Interceptor]:
    """For `Worker(interceptors=...)`: GenAI spans, metrics, history summaries. Spans go to
    `tracer_provider` (tests), else the process-wide one; message content on them only when
    `settings.trace_message_content` is on."""
    # Imported here, not at the top: the client side (surfaces.client) imports this module
    # for `tracing_interceptors` and must not pull in the activity code the interceptor uses.
    from workers.interceptors import TaskTelemetryInterceptor

    content = settings.trace_message_content if settings is not None else False
    return [TaskTelemetryInterceptor(tracer_provider, capture_content=content)]


def metrics_config(env: Mapping[str, str] | None = None) -> PrometheusConfig | OpenTelemetryConfig | None:
    """Where Temporal's runtime sends metrics: Prometheus, OTLP, or nowhere."""
    env = os.environ if env is None else env
    if address := _env(env, "OPENLOOP_METRICS_ADDRESS"):
        return PrometheusConfig(bind_address=address, counters_total_suffix=True)
    if _env(env, "OTEL_METRICS_EXPORTER") == "none":
        return None
    endpoint = _env(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    base = _env(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    if not (endpoint or base):
        return None
    protocol = _env(env, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or _env(env, "OTEL_EXPORTER_OTLP_PROTOCOL")
    http = protocol != "grpc"  # the OpenTelemetry default is http/protobuf
    url = endpoint or (base.rstrip("/") + "/v1/metrics" if http else base)
    headers = _headers(env, "OTEL_EXPORTER_OTLP_METRICS_HEADERS") or _headers(
        env, "OTEL_EXPORTER_OTLP_HEADERS"
    )
    return OpenTelemetryConfig(url=url, headers=headers or None, http=http)


def metrics_runtime(env: Mapping[str, str] | None = None) -> Runtime | None:
    """A Temporal runtime exporting metrics as the env says, or None for the default runtime."""
    config = metrics_config(env)
    return _runtime(config) if config is not None else None


def _runtime(config: PrometheusConfig | OpenTelemetryConfig) -> Runtime:
    return Runtime(telemetry=TelemetryConfig(metrics=config, global_tags={"service": DEFAULT_SERVICE_NAME}))


def install_metrics_runtime(env: Mapping[str, str] | None = None) -> str | None:
    """Make the metrics runtime the default before any client connects; says where metrics go."""
    config = metrics_config(env)
    if config is None:
        return None
    Runtime.set_default(_runtime(config), error_if_already_set=True)
    if isinstance(config, PrometheusConfig):
        return f"Prometheus metrics on http://{config.bind_address}/metrics"
    return f"OTLP metrics to {config.url}"
