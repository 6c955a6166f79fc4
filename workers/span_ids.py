"""Span ids chosen ahead: a task run's `invoke_agent` span is made when the run ends, with
the ids its workflow derived from the run id at the start (`workers.agent_span`).

Kept apart from the span code so the client side (`workers.telemetry`) can build its
tracer provider with `PinnableIds` without importing activity code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

_PINNED: ContextVar[tuple[int, int] | None] = ContextVar("openloop_pinned_span_ids", default=None)


class PinnableIds(RandomIdGenerator):  # a RandomIdGenerator is what the SDK's provider types
    """The ids of `inner` (random ones by default), except for a span made inside
    `pinned(trace_id, span_id)`."""

    def __init__(self, inner: IdGenerator | None = None) -> None:
        self.inner = inner or RandomIdGenerator()

    def generate_span_id(self) -> int:
        ids = _PINNED.get()
        return ids[1] if ids else self.inner.generate_span_id()

    def generate_trace_id(self) -> int:
        ids = _PINNED.get()
        return ids[0] if ids else self.inner.generate_trace_id()


@contextmanager
def pinned(trace_id: int, span_id: int) -> Iterator[None]:
    token = _PINNED.set((trace_id, span_id))
    try:
        yield
    finally:
        _PINNED.reset(token)


def run_span_ids(run_id: str) -> tuple[int, int]:
    """(trace id for a run with no trace of its own, span id) of a run's agent span."""
    digest = hashlib.sha256(f"openloop.invoke_agent:{run_id}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1
