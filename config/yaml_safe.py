"""The one way the project reads YAML: PyYAML's safe loader, with what aliases expand to bounded.

An alias (`*name`) stands for its anchor's whole value. Ten aliases to a list of ten aliases to
a list of ten ... (a "billion laughs") make a few lines stand for billions of values; PyYAML
builds them as shared objects in no time, and whatever walks the data next (validation, the
seed form's rewrite, a hash) then runs for minutes until memory runs out. So each document is
measured before it is built: every node is sized once (linear in the text), the values that
aliases add beyond what is written are summed, and past `MAX_ALIAS_VALUES` (or for an alias
inside its own anchor, `&a [*a]`) the loader raises `AliasBombError`. It is a marked YAML
error, so every reader reports it like any other YAML problem: file, line, what to do.

Agent and loop files (`config.loader`), playbooks (`config.playbooks.yaml_text`) and skills'
frontmatter (`config.skills`) all load through these classes; nothing else calls `yaml.load`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.constructor import ConstructorError

__all__ = ["MAX_ALIAS_VALUES", "AliasBombError", "PySafeLoader", "SafeLoader", "check_aliases"]

# Values aliases may add to one document beyond those written out. Shared defaults merged into
# a few dozen entries stay far below; an alias bomb passes it within a handful of lines.
MAX_ALIAS_VALUES = 10_000


class AliasBombError(ConstructorError):
    """A document whose aliases expand past the limit, or refer to the value holding them."""


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        yield from node.value
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value


def check_aliases(root: yaml.Node, limit: int = MAX_ALIAS_VALUES) -> None:
    """Raise `AliasBombError` at the value where aliases pass `limit` extra values.

    A composed document is a graph in which an alias is a second edge to its anchor's node;
    a depth-first walk sizes each node once, and every edge to a node already sized adds that
    node's size. Iterative, so a deeply nested document cannot exhaust the stack here.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = {id(root)}
    stack: list[tuple[yaml.Node, Iterator[yaml.Node], int]] = [(root, _children(root), 1)]
    added = 0
    while stack:
        node, children, size = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.discard(id(node))
            sizes[id(node)] = size
            if stack:
                parent, rest, total = stack[-1]
                stack[-1] = (parent, rest, total + size)
            continue
        if id(child) in on_path:
            raise AliasBombError(
                None, None, "an alias refers to the value that holds it (a recursive anchor); write the "
                "value out instead", node.start_mark,
            )  # fmt: skip
        if id(child) in sizes:  # reached again: through an alias
            added += sizes[id(child)]
            stack[-1] = (node, children, size + sizes[id(child)])
            if added > limit:
                raise AliasBombError(
                    None, None, f"aliases here expand to more than {limit} values beyond those written "
                    "(an alias bomb); write the values out or use fewer aliases", node.start_mark,
                )  # fmt: skip
            continue
        on_path.add(id(child))
        stack.append((child, _children(child), 1))


class _Bounded:
    """Measures each document's aliases before constructing it (see `check_aliases`)."""

    def construct_document(self, node: yaml.Node) -> Any:
        check_aliases(node)
        return super().construct_document(node)  # type: ignore[misc]


class PySafeLoader(_Bounded, yaml.SafeLoader):
    """The pure-Python safe loader, bounded: the base for a loader that changes resolvers."""


# libyaml's parser when PyYAML was built with it: the same nodes and marks, ~10x faster.
_CSafeLoader: Any = getattr(yaml, "CSafeLoader", None)
SafeLoader: Any = (
    type("CSafeLoader", (_Bounded, _CSafeLoader), {}) if _CSafeLoader is not None else PySafeLoader
)
