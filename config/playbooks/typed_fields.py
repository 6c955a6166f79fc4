"""Typed field maps: an event's fields and a step's `output:`, e.g.

    {verdict: enum[pass, fail], notes: str, count: int, tags: list[str], url: str?}

Types are `str`, `int`, `float`, `bool`, `list[str]` and `enum[a, b, ...]`; a trailing `?`
makes a field optional; Loopy's `url` reads as `str`. Field names are lowercase identifiers,
so `{{ event.field }}` and `{{ step.field }}` can name them.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from config.playbooks.yaml_text import YamlDoc
from config.problems import ConfigProblem, Loc
from workflows.playbook_types import FieldKind, TypedField

__all__ = ["FIELD_NAME", "parse_type", "read_field_map", "type_text"]

FIELD_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_ENUM = re.compile(r"^enum\[(.*)\]$")
_CHOICE = re.compile(r"^[A-Za-z0-9_.-]+$")
_SIMPLE = {kind.value: kind for kind in FieldKind if kind is not FieldKind.ENUM}
TYPES_HINT = "str, int, float, bool, list[str] or enum[a, b] (a trailing ? makes it optional)"


def parse_type(text: str) -> tuple[FieldKind, tuple[str, ...], bool]:
    """(kind, enum choices, optional) of a type such as `enum[pass, fail]?`; ValueError says why."""
    written = text.strip()
    optional = written.endswith("?")
    bare = written.removesuffix("?").strip()
    if bare in _SIMPLE:
        return _SIMPLE[bare], (), optional
    if bare == "url":  # Loopy's: a URL is text
        return FieldKind.STR, (), optional
    enum = _ENUM.match(bare)
    if enum is None:
        close = difflib.get_close_matches(bare, [*_SIMPLE, "enum[...]"], n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"unknown type {bare!r}; {hint}write {TYPES_HINT}")
    choices = tuple(choice.strip().strip("'\"") for choice in enum.group(1).split(","))
    if not choices or any(not _CHOICE.match(choice) for choice in choices):
        raise ValueError(f"{bare!r} needs choices of letters, digits, '_', '.' or '-', e.g. enum[pass, fail]")
    if len(set(choices)) != len(choices):
        raise ValueError(f"{bare!r} lists a choice twice; list each once")
    return FieldKind.ENUM, choices, optional


def type_text(field: TypedField) -> str:
    """The type as a playbook file writes it: `enum[pass, fail]`, `str?`."""
    base = f"enum[{', '.join(field.choices)}]" if field.kind is FieldKind.ENUM else field.kind.value
    return base + ("?" if field.optional else "")


def read_field_map(doc: YamlDoc, loc: Loc, value: Any) -> tuple[tuple[TypedField, ...], list[ConfigProblem]]:
    """The typed fields of the map at `loc` in `doc`, each problem at its own line."""
    if not isinstance(value, dict):
        example = "{verdict: enum[pass, fail], notes: str}"
        return (), [doc.problem(loc, f"expected a map of field names to types, e.g. {example}")]
    fields: list[TypedField] = []
    problems: list[ConfigProblem] = []
    for name, written in value.items():
        at = (*loc, str(name))
        if not isinstance(name, str) or not FIELD_NAME.match(name):
            problems.append(
                doc.problem(at, f"{name!r} is not a field name; use lowercase letters, digits and _")
            )
            continue
        if not isinstance(written, str):
            problems.append(doc.problem(at, f"{written!r} is not a type; write {TYPES_HINT}"))
            continue
        try:
            kind, choices, optional = parse_type(written)
        except ValueError as exc:
            problems.append(doc.problem(at, str(exc)))
            continue
        fields.append(TypedField(name=name, kind=kind, choices=choices, optional=optional))
    return tuple(fields), problems
