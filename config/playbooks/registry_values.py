"""Small readers the registry and step files share: dollars, and the message for an unknown key."""

from __future__ import annotations

import difflib
import re
from typing import Any

__all__ = ["parse_usd", "unknown_key"]

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
