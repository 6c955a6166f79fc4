"""An OTLP/HTTP trace receiver in the test process, standing in for a collector: it decodes
each `ExportTraceServiceRequest` (protobuf, POST /v1/traces) into plain spans to assert on."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root
    kind: int
    attributes: dict[str, Any]
    service: str
    schema_url: str
    status_code: int = 0
    start_ns: int = 0
    end_ns: int = 0


@dataclass
class OtlpReceiver:
    url: str
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # path, type, authorization
    spans: list[ReceivedSpan] = field(default_factory=list)

    def named(self, prefix: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.name.startswith(prefix)]

    def by_id(self) -> dict[str, ReceivedSpan]:
        return {span.span_id: span for span in self.spans}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def decode(body: bytes) -> list[ReceivedSpan]:
    spans = []
    for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        service=str(resource.get("service.name", "")),
                        schema_url=scope.schema_url,
                        status_code=span.status.code,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                    )
                )
    return spans


def otlp_receiver() -> Iterator[OtlpReceiver]:
    """Serve until the generator is closed (use it as a fixture body)."""
    received = OtlpReceiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.requests.append(
                (self.path, self.headers["Content-Type"], self.headers.get("Authorization", ""))
            )
            received.spans.extend(decode(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    received.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
