"""The production packages' import graph: no cycles, and each layer imports only downward.

The graph is built with `ast` from the source, so it needs no imports of its own: an edge for
every `import`/`from … import` anywhere in a module (inside functions too), and for every
`importlib.import_module` of a module named by a string literal in that module. Imports under
`if TYPE_CHECKING:` are left out: they never run. A cycle is a strongly connected component
of more than one module.

Layers (DESIGN.md): `workflows` is deterministic and imports no `activities`, `surfaces` or
`workers`; `config` is config-as-code over pydantic and the standard library.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("config", "workflows", "activities", "surfaces", "workers")

# Third-party modules config may import besides pydantic: YAML parsing (loaded through
# `config/yaml_safe.py`) and cron expressions (only when a playbook has a cron trigger).
CONFIG_THIRD_PARTY = {"pydantic", "pydantic_core", "yaml", "croniter"}
# config modules that still import workflow types (loop, coding and playbook types, the loop
# template's placeholders). The list only shrinks: the types move to config with the next
# change to workflows/, which then imports them from there.
CONFIG_IMPORTS_WORKFLOWS = {
    "config.coding",
    "config.loop",
    "config.loop_fields",
    "config.loop_json",
    "config.playbooks.compiler",
    "config.playbooks.emit_loops",
    "config.playbooks.github_builtins",
    "config.playbooks.limits",
    "config.playbooks.registry",
    "config.playbooks.registry_checks",
    "config.playbooks.step_checks",
    "config.playbooks.step_files",
    "config.playbooks.typed_fields",
}


def module_files() -> dict[str, Path]:
    """Every production module by dotted name (directories that are not packages left out)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if not all(part.isidentifier() for part in parts):
                continue  # e.g. config/loops/demo-project: a sample project, not a module
            if not all((ROOT.joinpath(*parts[:i]) / "__init__.py").exists() for i in range(1, len(parts))):
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those only under `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _calls_import_module(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in {"import_module", "__import__"}


def imported_names(name: str, path: Path) -> set[str]:
    """Dotted names a module imports at run time (absolute; relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    dynamic = False
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import name` lands on pkg.name when that is a module, else on pkg.
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif _calls_import_module(node):
            dynamic = True
    if dynamic:
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
    return names


def _resolve(target: str, modules: dict[str, Path]) -> str | None:
    """The production module an imported name lands in (its longest module prefix)."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


@functools.cache
def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for target in imported_names(name, path):
            resolved = _resolve(target, modules) if target.split(".")[0] in PACKAGES else None
            if resolved is not None and resolved != name:
                edges.add(resolved)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_production_packages_import_no_cycle() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_workflows_import_no_activities_surfaces_or_workers() -> None:
    graph = import_graph()
    wrong = {
        (module, target)
        for module, targets in graph.items()
        if module.split(".")[0] == "workflows"
        for target in targets
        if target.split(".")[0] in {"activities", "surfaces", "workers"}
    }
    assert wrong == set()


def test_config_imports_only_pydantic_the_standard_library_and_config() -> None:
    modules = module_files()
    wrong = set()
    for name, path in modules.items():
        if name.split(".")[0] != "config":
            continue
        for target in imported_names(name, path):
            top = target.split(".")[0]
            if top == "workflows" and name in CONFIG_IMPORTS_WORKFLOWS:
                continue
            if top in {"config", "__future__"} | CONFIG_THIRD_PARTY or top in sys.stdlib_module_names:
                continue
            wrong.add((name, target))
    assert wrong == set()
    still = {
        name
        for name, path in modules.items()
        if name.split(".")[0] == "config"
        and any(t.startswith("workflows.") for t in imported_names(name, path))
    }
    assert still == CONFIG_IMPORTS_WORKFLOWS, "keep CONFIG_IMPORTS_WORKFLOWS to the modules that still do"


def _activities_part(module: str) -> str:
    """The part of `activities` a module belongs to: its subpackage, or itself at the top
    level; `runtime` (the settings and the store's pool) counts with `store`."""
    parts = module.split(".")
    if parts[:2] == ["activities", "runtime"]:
        return "activities.store"
    return ".".join(parts[:2])


def test_the_parts_of_activities_import_one_another_one_way() -> None:
    parts: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        if module.split(".")[0] != "activities":
            continue
        part = _activities_part(module)
        parts.setdefault(part, set())
        for target in targets:
            if target.split(".")[0] == "activities" and _activities_part(target) != part:
                parts[part].add(_activities_part(target))
    for targets in list(parts.values()):
        for target in targets:
            parts.setdefault(target, set())
    assert cycles(parts) == []


def test_the_shared_pieces_import_nothing_above_them() -> None:
    graph = import_graph()
    for leaf in ("activities.tool_errors", "activities.provider_errors", "activities.heartbeats"):
        assert {t for t in graph[leaf] if t.startswith("activities")} == set(), leaf
    assert {t for t in graph["activities.providers"] if t.startswith("activities")} == {
        "activities.provider_errors"
    }
    assert {t for t in graph["activities.store.tool_calls"] if t.startswith("activities")} <= {
        "activities.store.ledger",
        "activities.store.transcript",
    }


def test_the_offline_model_imports_only_downward() -> None:
    """Each part of `activities.offline` imports only the parts below it, and from the rest of
    `activities` only the transcript's shape."""
    order = ["reading", "thread", "meeting", "coding", "playbook_fields", "playbook", "linear", "model"]
    graph = import_graph()
    for index, name in enumerate(order):
        module = f"activities.offline.{name}"
        inside = {t.rsplit(".", 1)[-1] for t in graph[module] if t.startswith("activities.offline.")}
        assert inside <= set(order[:index]), module
        outside = {
            t for t in graph[module] if t.startswith("activities") and not t.startswith("activities.offline")
        }
        assert outside <= {"activities.store.transcript"}, module
