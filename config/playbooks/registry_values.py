"""Small readers the registry and step files share: dollars, the message for an unknown key, and
whether an event entry is Loopy's bare field map."""

from __future__ import annotations

import difflib
import re
from typing import Any

from config.playbooks.typed_fields import parse_type

__all__ = ["bare_fields", "parse_usd", "unknown_key"]

_USD = re.compile(r"^\$?\s*(\d+(?:\.\d+)?)$")


def parse_usd(value: Any) -> float:
    """US dollars in `$0.50`, `0.5` or `2`; ValueError says how to write it."""
    match = _USD.match(str(value).strip()) if isinstance(value, (str, int, float)) else None
    if match is None or isinstance(value, bool) or float(match.group(1)) <= 0:
        raise ValueError(f"{value!r} is not an amount of US dollars above zero; write e.g. $0.50")
    return float(match.group(1))


def unknown_key(key: object, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key {str(key)!r}; {hint}allowed keys here: {', '.join(allowed)}"


def bare_fields(entry: dict[str, Any], keys: tuple[str, ...]) -> bool:
    """Loopy's bare field map (`WorkItem: {link: url, description: str}`): no `fields:`, and a
    key that could be one of ours (`description`, `github`, ...) holds a field type, not a setting."""

    def typed(value: Any) -> bool:
        try:
            return isinstance(value, str) and bool(parse_type(value))
        except ValueError:
            return False

    return bool(entry) and "fields" not in entry and all(k not in keys or typed(v) for k, v in entry.items())
