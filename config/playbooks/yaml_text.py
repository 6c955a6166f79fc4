"""YAML as playbook files write it: `on:` is a key, `{verdict: enum[pass, fail], url: str?}` a map.

Two habits of playbook authors trip plain YAML 1.1: `on:` reads as the boolean `True`, and a
type such as `enum[pass, fail]` or `str?` inside a one-line `{...}` map is a syntax error
there. The loader here reads only `true`/`false` as booleans, and a type written in a value
position is quoted before parsing (the text keeps its lines, so every line number holds).

A file is parsed by libyaml when PyYAML has it (~10x faster: a long playbook is thousands of
files), with the same resolvers and constructors, so the same data and lines; a file libyaml
refuses, or one holding a tab (which libyaml reads more leniently), is parsed by the pure-Python
parser, so what is refused and the wording of every error stay as they were.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from config.problems import ConfigProblem, Loc, field_path
from config.yaml_nodes import duplicate_keys, line_of
from config.yaml_safe import AliasBombError, PySafeLoader, SafeLoader

__all__ = ["YamlDoc", "load_yaml"]

# `key: enum[a, b]`, `key: list[str]?`, `key: str?` (in a flow map or a block): quoted as text.
_TYPE_VALUE = re.compile(
    r"(:[ \t]+)((?:enum|list)\[[^\]\n]*\]\??|[A-Za-z_][A-Za-z0-9_]*\?)(?=[ \t]*(?:[,}#\n]|$))"
)


class _Loader(PySafeLoader):
    """The bounded safe loader (`config.yaml_safe`) whose booleans are YAML 1.2's: `on`, `off`,
    `yes`, `no` stay text."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class _FastLoader(SafeLoader):  # type: ignore[misc,valid-type]
    """libyaml's parser (or the pure-Python one without it) with `_Loader`'s resolvers."""


class _AliaslessLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """`_FastLoader` without the alias bound, for a text holding no `*`: without an alias
    there is nothing to bound, and sizing every node of 10,000 files costs a sixth of the compile."""


_FastLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers
_AliaslessLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers


def _quote_types(text: str) -> str:
    return _TYPE_VALUE.sub(lambda m: f'{m.group(1)}"{m.group(2)}"', text)


class YamlDoc:
    """One parsed YAML mapping and where each of its keys was written in the file."""

    def __init__(self, source: str, node: yaml.Node | None, data: Any, first_line: int):
        self.source = source
        self.node = node
        self.data = data
        self._offset = first_line - 1  # the document's first line in the file

    def line(self, loc: Loc) -> int | None:
        """The file's line of the deepest key of `loc` that is present."""
        line = line_of(self.node, loc)
        return line + self._offset if line is not None else None

    def problem(self, loc: Loc, message: str) -> ConfigProblem:
        return ConfigProblem(self.source, self.line(loc), field_path(loc), message)

    def duplicate_keys(self) -> list[ConfigProblem]:
        if self.node is None:
            return []
        return [
            ConfigProblem(self.source, line + self._offset, field_path(loc), message)
            for loc, line, message in duplicate_keys(self.node)
        ]


def load_yaml(text: str, source: str, first_line: int = 1) -> tuple[YamlDoc | None, list[ConfigProblem]]:
    """The mapping in `text` (which starts on the file's `first_line`), or the problems."""
    quoted = _quote_types(text)
    if "\t" in quoted:  # libyaml takes a tab where the pure-Python parser refuses one (`a:\t1`)
        return _load_slowly(quoted, source, first_line)
    try:
        node, data = _parse(_FastLoader if "*" in quoted else _AliaslessLoader, quoted)
    except (yaml.YAMLError, ValueError):  # worded by libyaml: parse again for our words
        return _load_slowly(quoted, source, first_line)
    return _doc(source, node, data, first_line)


def _parse(loader_class: Any, text: str) -> tuple[yaml.Node | None, Any]:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else {})
    finally:
        loader.dispose()


def _load_slowly(text: str, source: str, first_line: int) -> tuple[YamlDoc | None, list[ConfigProblem]]:
    """The pure-Python parser's reading of `text`, and its wording of what is wrong."""
    try:
        node, data = _parse(_Loader, text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + first_line if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        hint = (
            ""
            if isinstance(exc, AliasBombError)
            else " (quote a value that holds ': ' or starts with a special character)"
        )
        return None, [ConfigProblem(source, line, "", f"not valid YAML: {problem}{hint}")]
    except ValueError as exc:  # bad dates and numbers
        return None, [ConfigProblem(source, first_line, "", f"not valid YAML: {exc}")]
    return _doc(source, node, data, first_line)


def _doc(
    source: str, node: yaml.Node | None, data: Any, first_line: int
) -> tuple[YamlDoc | None, list[ConfigProblem]]:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        shown = type(data).__name__
        return None, [
            ConfigProblem(source, first_line, "", f"expected a mapping of `key: value` lines (got {shown})")
        ]
    doc = YamlDoc(source, node, data, first_line)
    return doc, doc.duplicate_keys()
