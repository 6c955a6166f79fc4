"""A playbook step's declared output: asking for it, and checking the answer has it.

A step declares a typed field map (`{verdict: enum[pass, fail], notes: str}`); its agent is
told to end its answer with one JSON object holding exactly those fields. `parse_output`
takes the last JSON object the answer ends with and checks each field's type, choices and
presence; what it finds wrong is said in a sentence the model can act on when it is asked
again (`retry_request`). Fields the step did not declare are dropped, never passed on.

Pure: no I/O, importable inside the workflow sandbox.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from workflows.playbook_types import FieldKind, TypedField

__all__ = ["OutputInvalid", "output_demand", "output_schema", "parse_output", "retry_request"]

# How far back from the end a JSON object may start: an answer's trailing object, not a
# document quoted in the middle of it.
MAX_OBJECT_CHARS = 50_000
_FENCE = "```"


class OutputInvalid(ValueError):
    """The answer does not end with the declared JSON object; the message says why."""


def describe(field: TypedField) -> str:
    kind = (
        f"one of {', '.join(map(json.dumps, field.choices))}" if field.kind is FieldKind.ENUM else field.kind
    )
    return f'"{field.name}": {kind}{" (optional)" if field.optional else ""}'


def output_demand(fields: Sequence[TypedField]) -> str:
    """What the step's request says about the answer's shape."""
    lines = [
        "End your answer with one JSON object, and nothing after it, with exactly these fields:",
        *(f"- {describe(field)}" for field in fields),
        "Write whatever you want to say before the object; the object itself is read by a program.",
    ]
    return "\n".join(lines)


_JSON_TYPES: dict[FieldKind, dict[str, Any]] = {
    FieldKind.STR: {"type": "string"},
    FieldKind.INT: {"type": "integer"},
    FieldKind.FLOAT: {"type": "number"},
    FieldKind.BOOL: {"type": "boolean"},
    FieldKind.LIST_STR: {"type": "array", "items": {"type": "string"}},
}


def output_schema(fields: Sequence[TypedField]) -> dict[str, Any]:
    """The declared output as a JSON schema: what a provider's structured-output mode is asked
    for (the answer is still checked by `parse_output`, whatever the provider did)."""
    properties = {
        field.name: {"type": "string", "enum": list(field.choices)}
        if field.kind is FieldKind.ENUM
        else dict(_JSON_TYPES[field.kind])
        for field in fields
    }
    return {
        "type": "object",
        "properties": properties,
        "required": [field.name for field in fields if not field.optional],
        "additionalProperties": False,
    }


def retry_request(request: str, answer: str, problem: str) -> str:
    """The step's request again, with the answer that did not validate and why."""
    return "\n\n".join(
        [
            request,
            "Your previous answer ended like this:",
            f"{_FENCE}\n{answer[-2000:]}\n{_FENCE}",
            f"It did not have the required output: {problem}. Answer again, ending with the JSON "
            "object in the required shape.",
        ]
    )


def _trailing_object(answer: str) -> dict[str, Any]:
    text = answer.strip()
    if text.endswith(_FENCE):  # a fenced block at the end: ```json {...} ```
        text = text[: -len(_FENCE)].rstrip()
    if not text.endswith("}"):
        raise OutputInvalid("the answer does not end with a JSON object")
    decoder = json.JSONDecoder()
    start = text.rfind("{")
    floor = max(0, len(text) - MAX_OBJECT_CHARS)
    while start >= floor:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            value, end = None, -1
        if end == len(text) and isinstance(value, dict):
            return value
        start = text.rfind("{", floor, start)
    raise OutputInvalid("the JSON object at the end of the answer does not parse")


def _problem(field: TypedField, value: Any) -> str | None:
    kind = field.kind
    if kind is FieldKind.STR and not isinstance(value, str):
        return f"{field.name!r} must be a string"
    if kind is FieldKind.INT and (isinstance(value, bool) or not isinstance(value, int)):
        return f"{field.name!r} must be an integer"
    if kind is FieldKind.FLOAT and (isinstance(value, bool) or not isinstance(value, int | float)):
        return f"{field.name!r} must be a number"
    if kind is FieldKind.BOOL and not isinstance(value, bool):
        return f"{field.name!r} must be true or false"
    if kind is FieldKind.ENUM and value not in field.choices:
        return f"{field.name!r} must be one of {', '.join(field.choices)}, not {json.dumps(value)}"
    if kind is FieldKind.LIST_STR and (
        not isinstance(value, list) or not all(isinstance(item, str) for item in value)
    ):
        return f"{field.name!r} must be a list of strings"
    return None


def parse_output(answer: str, fields: Sequence[TypedField]) -> dict[str, Any]:
    """The declared fields of the JSON object `answer` ends with; OutputInvalid when it has none
    or a field is missing or of the wrong type (every problem, in one sentence)."""
    found = _trailing_object(answer)
    output: dict[str, Any] = {}
    problems: list[str] = []
    for field in fields:
        if field.name not in found or found[field.name] is None:
            if not field.optional:
                problems.append(f"{field.name!r} is missing")
            continue
        problem = _problem(field, found[field.name])
        if problem is not None:
            problems.append(problem)
        else:
            output[field.name] = found[field.name]
    if problems:
        raise OutputInvalid("; ".join(problems))
    return output
