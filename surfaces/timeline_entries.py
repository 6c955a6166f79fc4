"""The entries of a task's story and the story itself, as `surfaces.timeline` reads them from a
history, and the decoding of a recorded payload. Pure data: no client calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from temporalio.api.common.v1 import Payloads

from workflows.payloads import data_converter
from workflows.types import TaskInput, TaskResult

if TYPE_CHECKING:
    from surfaces.timeline_children import ChildRun  # which reads entries: only a type here

T = TypeVar("T")


class EntryKind(StrEnum):
    """What an entry of a task's story tells; the value is what the CLI and dashboard show."""

    START = "start"
    MODEL = "model"
    TOOL = "tool"
    APPROVAL = "approval"
    SIGNAL = "signal"
    REFUSED = "refused"  # a decision or a tool call that did not count
    STATUS = "status"
    REPLY = "reply"
    RECALL = "recall"
    CHILD = "child"  # a subagent or teammate started, waited on or finished
    FAILURE = "failure"  # an activity failed (it may be retried)
    STOP = "stop"


@dataclass
class Entry:
    at: datetime | None
    kind: EntryKind
    what: str
    step: int | None = None
    who: str | None = None
    cost_usd: float = 0.0


@dataclass
class Story:
    task: TaskInput | None = None
    result: TaskResult | None = None
    closed: str | None = None  # how the run ended when it did not return a result
    entries: list[Entry] = field(default_factory=list)
    children: list[ChildRun] = field(default_factory=list)  # subagents and teammates it started
    blocked: list[str] = field(default_factory=list)  # what the network allowlist refused its commands

    @property
    def cost_usd(self) -> float:
        return sum(entry.cost_usd for entry in self.entries)


def decode(payloads: Payloads, type_: type[T]) -> T | None:
    """A recorded payload as `type_`; None when empty or written by a version this one cannot read."""
    if not payloads.payloads:
        return None
    try:
        return data_converter.payload_converter.from_payloads(payloads.payloads, [type_])[0]  # type: ignore[no-any-return]
    except Exception:  # a payload this version cannot read is skipped, not fatal
        return None


def parse_iso(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
