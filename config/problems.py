"""The problems an agent file can have, and pydantic's errors turned into them.

`ConfigProblem` (file, line, field path, message) and `AgentConfigError` (a list of them)
are what every config reader raises; `expand_error` words one pydantic validation error as
a person should read it: what is allowed there, the closest allowed key, what to add.
Nothing here reads files or YAML (that is `config.loader`).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from config.agent import AgentConfig

Loc = tuple[str | int, ...]

# A value shown back in a message is cut to this many characters.
_MAX_SHOWN = 60
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class ConfigProblem:
    file: str
    line: int | None
    field: str
    message: str
    document: int | None = None  # 1-based; set only when the file holds several documents

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        if self.document is not None:
            where += f" (document {self.document})"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class AgentConfigError(Exception):
    """One or more problems in an agent file; `str()` lists each on its own line."""

    def __init__(self, problems: list[ConfigProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def field_path(loc: Loc) -> str:
    """`("spec", "tools", 2, "name")` -> `spec.tools[2].name`; odd keys as `spec['a b']`."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    """The model inside an annotation such as `list[ToolSpec]` or `SlackSurface | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None


def _model_at(loc: Loc) -> type[BaseModel] | None:
    model: type[BaseModel] | None = AgentConfig
    for part in loc:
        if isinstance(part, int) or model is None:
            continue  # a list index: the items share one model
        field = model.model_fields.get(part)
        model = _inner_model(field.annotation) if field is not None else None
    return model


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _unknown_key(loc: Loc) -> str:
    model = _model_at(loc[:-1])
    if model is None:
        return "unknown key; remove it"
    allowed = list(model.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key {str(loc[-1])!r}; {hint}allowed keys here: {', '.join(allowed)}"


def _missing(loc: Loc) -> str:
    model = _model_at(loc[:-1])
    field = model.model_fields.get(str(loc[-1])) if model is not None and loc else None
    if field is not None and typing.get_origin(field.annotation) is typing.Literal:
        return f"required field is missing; add `{loc[-1]}: {typing.get_args(field.annotation)[0]}`"
    return "required field is missing; add it"


def _describe(error: dict[str, Any], loc: Loc) -> str:
    kind = error["type"]
    message = str(error["msg"]).removeprefix("Value error, ")
    ctx = error.get("ctx") or {}
    got = f" (got {_shown(error.get('input'))})"
    if kind == "extra_forbidden":
        return _unknown_key(loc)
    if kind == "invalid_key":
        return f"key {_shown(error.get('input'))} must be text; quote it or remove it"
    if kind in ("literal_error", "enum"):
        return message.replace("Input should be", "allowed values are") + got
    if kind == "missing":
        return _missing(loc)
    if kind == "model_type" or kind == "dict_type":
        return "expected a mapping (indented `key: value` lines)" + got
    if kind == "list_type":
        return "expected a list, e.g. [a, b] or one `- item` per line" + got
    if kind == "greater_than_equal" and ctx.get("ge") == 0:
        return f"must be 0 or more; negative values are not allowed{got}"
    if kind == "greater_than" and ctx.get("gt") == 0:
        return f"must be more than 0{got}"
    if kind.endswith(("_type", "_parsing")) or kind in (
        "greater_than",
        "greater_than_equal",
        "less_than_equal",
        "too_short",
        "string_too_short",
        "finite_number",
    ):
        return message + got
    return message


def expand_error(error: dict[str, Any]) -> list[tuple[Loc, str]]:
    """One pydantic error -> (location, message) pairs; rule errors carry their own paths."""
    loc: Loc = tuple(p for p in error["loc"] if not str(p).startswith("function-"))
    if error["type"] == "invalid_key" and loc:
        loc = (*loc[:-1], str(loc[-1]))  # a non-text key is a key, not a list index
    problems = (error.get("ctx") or {}).get("problems")
    if error["type"] == "config_rule" and problems:
        return [((*loc, *sub), message) for sub, message in problems]
    return [(loc, _describe(error, loc))]
