"""References in a step's prose, and filling them in.

    {{ event.field }}     a field of the event that started the run (cron: scheduled_at, last_run)
    {{ step.field }}      an output field of an upstream step, e.g. {{ investigate.verdict }}
    {{ steps.step.field }}  the same, spelled out (the form to use when unsure)

The compiler checks every reference here; the run fills them in with
`workflows.playbook_template.fill`, which reads the same three forms. Pure string work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Reference", "find_references"]

_BRACES = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_EVENT = re.compile(r"^event\.([a-z_][a-z0-9_]*)$")
_STEP = re.compile(r"^(?:steps\.)?([a-z0-9][a-z0-9_-]*)\.([a-z_][a-z0-9_]*)$")
REFERENCE_HINT = "write {{ event.field }} or {{ step.field }} (e.g. {{ investigate.verdict }})"


@dataclass(frozen=True)
class Reference:
    text: str  # as written, braces included
    line: int  # 1-based, within the text searched
    field: str
    step: str | None = None  # None: a field of the event
    problem: str = ""  # set when the text between the braces is not a reference


def find_references(text: str, first_line: int = 1) -> list[Reference]:
    """Every `{{ ... }}` in `text`, the first of which starts at file line `first_line`."""
    found = []
    for match in _BRACES.finditer(text):
        inner = match.group(1).strip()
        line = first_line + text.count("\n", 0, match.start())
        event, step = _EVENT.match(inner), _STEP.match(inner)
        if event is not None:
            found.append(Reference(match.group(0), line, event.group(1)))
        elif step is not None and step.group(1) != "event":
            found.append(Reference(match.group(0), line, step.group(2), step.group(1)))
        else:
            found.append(
                Reference(
                    match.group(0), line, "", problem=f"{match.group(0)} is not a reference; {REFERENCE_HINT}"
                )
            )
    return found
