"""Where things are in a YAML file a person wrote: the documents it holds, the line of a field,
keys written twice, the first place a value appears; and reading the file with an error that
names it. Shared by every loader of YAML config (agents, loops, playbooks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from config.problems import AgentConfigError, ConfigProblem, Loc
from config.yaml_safe import SafeLoader

__all__ = ["duplicate_keys", "find_value", "line_of", "read_text_file", "yaml_documents"]


def line_of(node: yaml.Node | None, path: Loc) -> int | None:
    """1-based line of the deepest node of `path` present in the composed YAML."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in path:
        if isinstance(node, yaml.MappingNode):
            pair = next((p for p in node.value if getattr(p[0], "value", None) == str(key)), None)
            if pair is None:
                break  # a missing key: the parent's line is the place to add it
            # The key's line, not its value's: a block list or mapping starts a line lower.
            line = pair[0].start_mark.line + 1
            node = pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def duplicate_keys(
    node: yaml.Node, loc: Loc = (), seen_nodes: set[int] | None = None
) -> list[tuple[Loc, int, str]]:
    """YAML keeps the last of two equal keys without a word; a typo'd copy would hide a rule."""
    found: list[tuple[Loc, int, str]] = []
    # An alias reuses its anchor's node, and `&a [*a]` makes a cycle: visit each node once.
    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:
        return found
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            name = getattr(key, "value", None)
            if isinstance(name, str) and isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if name in seen:
                    first = f"duplicate key; first set on line {seen[name]}"
                    found.append(((*loc, name), line, first))
                seen.setdefault(name, line)
                found += duplicate_keys(value, (*loc, name), seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found += duplicate_keys(item, (*loc, index), seen_nodes)
    return found


def yaml_documents(text: str, source: str) -> list[tuple[yaml.Node, Any]]:
    """Every non-empty YAML document in `text` as (node, data), or an error naming the line."""
    documents: list[tuple[yaml.Node, Any]] = []
    loader: Any = None
    try:
        loader = SafeLoader(text)  # checks for unprintable characters first
        while loader.check_node():
            node = loader.get_node()
            data = loader.construct_document(node) if node is not None else None
            if node is not None and data is not None:
                documents.append((node, data))
    except yaml.reader.ReaderError as exc:
        at = text[: exc.position].count("\n") + 1
        problem = f"character #x{exc.character:04x} is not allowed ({exc.reason})"
        problems = [ConfigProblem(source, at, "", f"not valid YAML: {problem}")]
        raise AgentConfigError(problems) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line: int | None = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        problems = [ConfigProblem(source, line, "", f"not valid YAML: {problem}")]
        raise AgentConfigError(problems) from None
    except Exception as exc:  # PyYAML raises ValueError etc. for bad dates and numbers
        problems = [ConfigProblem(source, None, "", f"not valid YAML: {exc}")]
        raise AgentConfigError(problems) from None
    finally:
        if loader is not None:
            loader.dispose()
    return documents


def find_value(node: yaml.Node, value: str, loc: Loc = ()) -> tuple[int, Loc] | None:
    if isinstance(node, yaml.ScalarNode):
        return (node.start_mark.line + 1, loc) if node.value == value else None
    items: list[tuple[str | int, yaml.Node]]
    if isinstance(node, yaml.SequenceNode):
        items = list(enumerate(node.value))
    elif isinstance(node, yaml.MappingNode):
        items = [(str(getattr(key, "value", "")), item) for key, item in node.value]
    else:
        return None
    for key, item in items:
        found = find_value(item, value, (*loc, key))
        if found is not None:
            return found
    return None


def read_text_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        problem = ConfigProblem(str(path), None, "", "cannot read: not UTF-8 text")
        raise AgentConfigError([problem]) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        problem = ConfigProblem(str(path), None, "", f"cannot read: {reason}")
        raise AgentConfigError([problem]) from None
