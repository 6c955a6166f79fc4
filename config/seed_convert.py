"""An agent file rewritten in today's form with the user's text kept: `openloop agents convert`.

Only the parts that change are rewritten, each at the granularity of a top-level key or a
key of `metadata` / `spec` (`spec.tools`, `spec.surfaces`); every other line, comment and
blank line stays byte for byte. A rewritten part keeps the comments that were inside it
(above it), and says on each line it changed what it was (`# converted: github
issues:write`) and, above it, what could not be carried (`# warning: ...`).

Text and the YAML nodes the loader composed in, text out: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from config.problems import field_path
from config.seed_expansion import Expansion, Loc, Note

_SECTIONS = ("metadata", "spec")  # mappings rewritten key by key


@dataclass
class _Edits:
    replace: dict[int, tuple[int, list[str]]] = field(default_factory=dict)  # first -> (last, lines)
    insert_after: dict[int, list[str]] = field(default_factory=dict)

    def apply(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        index = 0
        while index < len(lines):
            if index in self.replace:
                last, new = self.replace[index]
                out += new
                for covered in range(index, last + 1):
                    out += self.insert_after.pop(covered, [])
                index = last + 1
                continue
            out.append(lines[index])
            out += self.insert_after.pop(index, [])
            index += 1
        return out


def convert_text(text: str, documents: list[tuple[yaml.Node, Expansion]]) -> str:
    """`text` with each document's changed parts rewritten in today's form and annotated."""
    lines = text.splitlines()
    edits = _Edits()
    for node, expansion in documents:
        if isinstance(node, yaml.MappingNode) and not node.flow_style:
            _mapping(node, (), expansion.data, expansion.notes, edits, lines)
        else:  # a document written as one flow mapping: rewritten whole
            first, last = node.start_mark.line, _last_line(node)
            whole = yaml.safe_dump(expansion.data, sort_keys=False, allow_unicode=True, width=100)
            said = _comments(lines[first : last + 1], 0) + _dropped((), expansion.notes, 0)
            edits.replace[first] = (last, said + whole.splitlines())
    return "\n".join(edits.apply(lines)) + "\n"


def _entries(node: yaml.MappingNode) -> list[tuple[str, yaml.Node, yaml.Node]]:
    return [(str(getattr(key, "value", "")), key, value) for key, value in node.value]


def _mapping(
    node: yaml.MappingNode, at: Loc, new: dict[str, Any], notes: list[Note], edits: _Edits, lines: list[str]
) -> None:
    old = yaml.safe_load(yaml.serialize(node)) or {}
    entries = _entries(node)
    changed: list[tuple[str, yaml.Node, yaml.Node]] = []
    for name, key, value in entries:
        if name in _SECTIONS and not at and isinstance(value, yaml.MappingNode) and not value.flow_style:
            if isinstance(new.get(name), dict):
                _mapping(value, (name,), new[name], notes, edits, lines)
                continue
        if name not in new or new[name] != old.get(name):
            changed.append((name, key, value))
    # A list item's comments go with what it became (an MCP tool's to its mcp_servers entry);
    # whatever was not placed stays above the part it was in.
    items: dict[Loc, list[str]] = {}
    heads: dict[str, list[str]] = {}
    for name, key, value in changed:
        heads[name] = _item_comments(lines, key, value, (*at, name), items)
    rendered: dict[str, list[str]] = {}
    for name, key, _ in changed:
        path = (*at, name)
        indent = key.start_mark.column
        rendered[name] = (
            _render(name, new, path, notes, indent, items) if name in new else _dropped(path, notes, indent)
        )
    for name in (n for n in new if n not in old):
        indent = entries[0][1].start_mark.column if entries else 0
        added = _render(name, new, (*at, name), notes, indent, items)
        edits.insert_after.setdefault(_after(entries, (*at, name), notes), []).extend(added)
    for name, key, value in changed:
        left = [row for loc, rows in items.items() if loc[len(at)] == name for row in rows]
        kept = heads[name] + left
        edits.replace[key.start_mark.line] = (_last_line(value), kept + rendered[name])


def _item_comments(
    lines: list[str], key: yaml.Node, value: yaml.Node, path: Loc, items: dict[Loc, list[str]]
) -> list[str]:
    """The comments of a part about to be rewritten: those of each item of a block list into
    `items` (by the item's place), the rest returned."""
    indent = key.start_mark.column
    first, last = key.start_mark.line, _last_line(value)
    if not isinstance(value, yaml.SequenceNode) or value.flow_style or not value.value:
        return _comments(lines[first : last + 1], indent)
    start = first + 1
    for index, item in enumerate(value.value):
        end = _last_line(item)
        items[(*path, index)] = _comments(lines[start : end + 1], indent)
        start = end + 1
    return _comments(lines[first : first + 1], indent) + _comments(lines[start : last + 1], indent)


def _after(entries: list[tuple[str, yaml.Node, yaml.Node]], path: Loc, notes: list[Note]) -> int:
    """The last line of the entry a new key came from (`mcp_servers` after `tools`), else the last."""
    sources = {n.original[len(path) - 1] for n in notes if n.converted and n.converted[: len(path)] == path}
    chosen = [value for name, _, value in entries if name in sources] or [entries[-1][2]]
    return _last_line(chosen[-1])


def _last_line(node: yaml.Node) -> int:
    """0-based line of the last character of `node` (a block collection's end mark may lie
    past comments that belong to the next key)."""
    if isinstance(node, yaml.ScalarNode) or getattr(node, "flow_style", False):
        mark = node.end_mark
        return mark.line - 1 if mark.column == 0 and mark.line > node.start_mark.line else mark.line
    children: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    return max((_last_line(child) for child in children), default=node.start_mark.line)


def _comments(lines: list[str], indent: int) -> list[str]:
    """The user's comments inside a rewritten part, whole-line and end-of-line, kept in order."""
    kept: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            kept.append(" " * indent + stripped)
        elif "#" in line:
            cut = _comment_start(line)
            if cut is not None:
                kept.append(" " * indent + line[cut:].strip())
    return kept


def _comment_start(line: str) -> int | None:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and index > 0 and line[index - 1] in " \t":
            return index
    return None


def _render(
    name: str, new: dict[str, Any], path: Loc, notes: list[Note], indent: int, items: dict[Loc, list[str]]
) -> list[str]:
    text = yaml.safe_dump({name: new[name]}, sort_keys=False, allow_unicode=True, width=100)
    rendered = text.splitlines()
    node = yaml.compose(text)
    said: dict[int, list[str]] = {}
    above: dict[int, list[str]] = {}
    for note in notes:
        if note.converted is None or note.converted[: len(path)] != path:
            continue
        line = _line_of(node, note.converted[len(path) - 1 :])
        said.setdefault(line, [])
        if note.message not in said[line]:
            said[line].append(note.message)
        item = note.original[: len(path) + 1]
        if len(note.converted) > len(path) and items.get(item):
            first_line = _line_of(node, note.converted[len(path) - 1 : len(path) + 1])
            above.setdefault(first_line, []).extend(row.strip() for row in items.pop(item))
    for line, messages in said.items():
        rendered[line] += "  # converted: " + "; ".join(messages)
    for line in sorted(above, reverse=True):
        column = len(rendered[line]) - len(rendered[line].lstrip())
        rendered[line:line] = [" " * column + row for row in above[line]]
    return _dropped(path, notes, indent) + [" " * indent + row for row in rendered]


def _dropped(path: Loc, notes: list[Note], indent: int) -> list[str]:
    """What the user wrote under `path` that has no meaning here, as comments."""
    said = [
        f"# {'warning' if n.warning else 'not carried'}: {field_path(n.original)}: {n.message}"
        for n in notes
        if n.converted is None and n.original[: len(path)] == path
    ]
    return [" " * indent + row for row in dict.fromkeys(said)]


def _line_of(node: yaml.Node | None, path: Loc) -> int:
    line = 0
    for key in path:
        if isinstance(node, yaml.MappingNode):
            pair = next((p for p in node.value if getattr(p[0], "value", None) == str(key)), None)
            if pair is None:
                break
            line, node = pair[0].start_mark.line, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line
        else:
            break
    return line
