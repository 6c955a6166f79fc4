"""The value types of a loop file: durations, sizes, command lines and metric patterns.

Each is an annotated type whose validator says what is wrong in words a person can act on,
so `config.loop` only has to arrange them into models. Pydantic only, like all of `config`.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from config.fields import parse_duration
from workflows.loop_template import PLACEHOLDERS, TRUSTED, misplaced_placeholders, unknown_placeholders

__all__ = [
    "Command",
    "command_line",
    "MetricRegex",
    "Megabytes",
    "Seconds",
    "parse_megabytes",
    "parse_seconds",
]

_DURATION_HINT = "write a number of seconds or a number and a unit, e.g. 90s, 10m, 1h"
_SIZE_HINT = "write a number of megabytes or a number and a unit, e.g. 256Mi, 2Gi, 512M"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:(Ki|Mi|Gi|Ti|k|K|M|G|T)B?)?\s*$")
# Kubernetes' quantities: the `i` units are powers of two, the others powers of ten.
_UNIT_BYTES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}
_MEBIBYTE = 2**20


def _positive_number(value: Any) -> float | None:
    """A YAML number as a float; None for anything else (`true` is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def parse_seconds(value: Any) -> float:
    """Seconds in `90s`, `10m`, `1h` or a plain number of seconds; more than zero."""
    seconds = _positive_number(value)
    if seconds is None:
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not a duration; {_DURATION_HINT}")
        try:
            seconds = float(value) if value.strip().replace(".", "", 1).isdigit() else parse_duration(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a duration; {_DURATION_HINT}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{value!r} must be longer than zero")
    return seconds


def parse_megabytes(value: Any) -> float:
    """Megabytes (MiB) in `512Mi`, `2Gi`, `256M` or a plain number of megabytes; more than zero."""
    megabytes = _positive_number(value)
    if megabytes is None:
        match = _SIZE.match(value) if isinstance(value, str) else None
        if match is None:
            raise ValueError(f"{value!r} is not a size; {_SIZE_HINT}")
        number, unit = float(match.group(1)), match.group(2)
        megabytes = number if unit is None else number * _UNIT_BYTES[unit] / _MEBIBYTE
    if not math.isfinite(megabytes) or megabytes <= 0:
        raise ValueError(f"{value!r} must be more than zero")
    return megabytes


def command_line(command: str) -> str:
    """A shell line that is not blank and whose placeholders are known and bare."""
    if not command.strip():
        raise ValueError("empty command; write the shell line to run, or remove the key")
    known = ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)
    unknown = unknown_placeholders(command)
    if unknown:
        names = ", ".join(f"{{{name}}}" for name in unknown)
        raise ValueError(
            f"unknown placeholder {names}; the placeholders are {known} "
            "(for a literal brace group write it with spaces, e.g. `{ x; }`)"
        )
    misplaced = misplaced_placeholders(command)
    if "last_error" in misplaced:
        raise ValueError(
            "{last_error} stands inside quotes, `${...}` or a here-document: its value is the last "
            "failed command's output, which the project under repair writes, so it could end the "
            "quotes and run as shell code; write it outside the quotes as an argument of its own, "
            "e.g. `--task 'Fix the latest failure:' {last_error}` (it is quoted for you)"
        )
    if misplaced:
        names = ", ".join(f"{{{name}}}" for name in misplaced)
        variables = ", ".join(f"${TRUSTED[name]}" for name in misplaced)
        raise ValueError(
            f"{names} stands inside `${{...}}` or a here-document, where it cannot be filled in "
            f"safely; write it bare or in quotes, or read {variables} there"
        )
    return command


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        at = f" at position {exc.pos}" if exc.pos is not None else ""
        raise ValueError(f"not a valid regular expression: {exc.msg}{at}") from None
    return pattern


Seconds = Annotated[float, BeforeValidator(parse_seconds)]
Megabytes = Annotated[float, BeforeValidator(parse_megabytes)]
Command = Annotated[str, AfterValidator(command_line)]
MetricRegex = Annotated[str, AfterValidator(_compiles)]
