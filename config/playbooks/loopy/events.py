"""`from loopy.events import Incident`: any registered event's name gives its constructor.

Loopy generates one class per registered event; here every name gives an `Event` subclass,
a dict of the fields it is called with, which is what a sensor returns to OpenLoop.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Event"]


class Event(dict[str, Any]):
    """An event's fields; `Incident(title="...")` == `{"title": "..."}`."""

    def __init__(self, **fields: Any) -> None:
        super().__init__(fields)


def __getattr__(name: str) -> type[Event]:
    if not name[:1].isupper():
        raise AttributeError(name)
    return type(name, (Event,), {"__module__": __name__})
