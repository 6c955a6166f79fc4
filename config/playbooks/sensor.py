"""The `@sensor` decorator a sensor file imports: marks a function as turning a webhook or a
poll into a registered event.

    from config.playbooks.sensor import sensor

    @sensor(webhook="/hooks/sentry", emits="Incident")
    def sentry_issues(request: dict) -> dict | None:   # the event's fields, or None for no event
        issue = request["data"]["issue"]
        return {"title": issue["title"], "link": issue["permalink"]}

The compiler never runs this (it reads the decorator's literals with `ast`, see
`config.playbooks.sensors`); the runtime imports a file that reading accepts and serves the
functions it declares, each checked with `declared_sensor` to carry the same mark. The
decorator returns the function unchanged apart from the mark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from config.fields import parse_duration

__all__ = ["SensorSpec", "declared_sensor", "sensor"]

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__openloop_sensor__"


@dataclass(frozen=True)
class SensorSpec:
    emits: str
    webhook: str | None = None
    poll_seconds: float | None = None


def sensor(*, emits: str, webhook: str | None = None, poll: str | None = None) -> Callable[[F], F]:
    """Declare a sensor: `emits` a registered event, triggered by exactly one of `webhook`
    (`/hooks/NAME`) or `poll` (a duration such as `5m`)."""
    if (webhook is None) == (poll is None):
        raise ValueError('a sensor has exactly one trigger: webhook="/hooks/NAME" or poll="5m"')
    spec = SensorSpec(emits, webhook, parse_duration(poll) if poll is not None else None)

    def mark(function: F) -> F:
        setattr(function, _MARK, spec)
        return function

    return mark


def declared_sensor(function: object) -> SensorSpec | None:
    """The declaration `@sensor` left on `function`, or None for any other object."""
    spec = getattr(function, _MARK, None)
    return spec if isinstance(spec, SensorSpec) else None
