"""Building blocks of every config model: strict models, durations, and rule errors that
point at the field (and so the line) to fix. Pydantic only, like all of `config`."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

# A path inside the model (field names and list indexes) and what is wrong there.
ProblemPath = tuple[str | int, ...]


def rule_error(problems: list[tuple[ProblemPath, str]]) -> PydanticCustomError:
    """One error carrying several problems, each with the path below the validated model.

    Pydantic places a model validator's error at the model itself (e.g. `spec`); the loader
    reads `ctx["problems"]` to point each problem at its own field and line instead.
    """
    summary = "; ".join(
        f"{'.'.join(str(p) for p in path) or '(here)'}: {message}" for path, message in problems
    )
    context = {"summary": summary, "problems": problems}
    return PydanticCustomError("config_rule", "{summary}", context)


def parse_duration(text: str) -> float:
    """Seconds in a duration such as `90s`, `30m`, `72h`, `7d` or `1w`."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration; write a number and a unit, e.g. 90s, 30m, 72h, 7d")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _duration_text(value: Any) -> Any:
    """Reject non-text (`ttl: 72` reads as a number) and zero or unparseable durations early."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration; write a number and a unit, e.g. 90s, 30m, 72h, 7d")
    if parse_duration(value) <= 0:
        raise ValueError(f"{value!r} must be longer than zero")
    return value


Duration = Annotated[
    str,
    BeforeValidator(_duration_text),
    Field(description="A duration such as 30m, 72h or 7d"),
]


class Strict(BaseModel):
    # Unknown keys are errors: a typo in a YAML key must not silently drop a rule.
    model_config = ConfigDict(extra="forbid", frozen=True)
