"""A playbook step's prose with its references filled in: `{{ event.field }}`, `{{ step.field }}`
and `{{ steps.step.field }}`.

Every value comes from outside the step's own instructions (a webhook's body, a Slack message,
what an upstream model answered), so each is put in as an untrusted-data block naming where it
came from: a value can never pose as instructions, or close its block early. The compiler
already checked every reference points at an event field or an upstream step's output field;
one that still resolves to nothing (an optional field left out) reads `(not given)`.

Pure string work with no I/O: the playbook workflow fills steps inside Temporal's sandbox.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from workflows.untrusted import wrap_untrusted

__all__ = ["MISSING", "fill", "references"]

MISSING = "(not given)"
_NAME = r"[A-Za-z_][\w-]*"
# `{{ event.repo }}`, `{{ investigate.verdict }}`, `{{ steps.investigate.verdict }}`.
_REFERENCE = re.compile(rf"\{{\{{\s*({_NAME})\.({_NAME})(?:\.({_NAME}))?\s*\}}\}}")


def references(text: str) -> list[tuple[str, str]]:
    """(`event` or a step's name, field) of every reference in `text`, in order."""
    found = []
    for match in _REFERENCE.finditer(text):
        first, second, third = match.groups()
        found.append((second, third) if first == "steps" and third else (first, second))
    return found


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def fill(text: str, event: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]]) -> str:
    """`text` with every reference replaced by its value as an untrusted-data block."""

    def value_of(match: re.Match[str]) -> str:
        first, second, third = match.groups()
        if first == "steps" and third:
            owner, field = second, third
        else:
            owner, field = first, second
        if owner == "event":
            value, source = event.get(field), f"event.{field}"
        elif owner in outputs:
            value, source = outputs[owner].get(field), f"step.{owner}.{field}"
        else:
            return match.group(0)  # not a reference the run knows: leave the text as written
        return wrap_untrusted(MISSING if value is None else _as_text(value), source)

    return _REFERENCE.sub(value_of, text)
