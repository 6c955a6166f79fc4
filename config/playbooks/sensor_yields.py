"""Sensors that `yield` their events: Loopy lets one poll emit several, here a sensor returns
one event's fields (or None) per poll or delivery, so a generator is refused each time it
is called. Read with `ast`, like every sensor (`config.playbooks.sensors`): a warning naming
the function's line and what to write instead, not an error, since the playbooks listening
still run when the event is fired by hand.
"""

from __future__ import annotations

import ast
from pathlib import Path

from config.playbooks.sensors import SensorDecl
from config.problems import ConfigProblem

__all__ = ["yielding_sensors"]


def _yields(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the function's own body yields (a nested function's yield is its own)."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return False


def yielding_sensors(sensors: list[SensorDecl]) -> list[ConfigProblem]:
    """A warning for each declared sensor whose function is a generator."""
    warnings = []
    for decl in sensors:
        try:
            tree = ast.parse(Path(decl.file).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue  # its reading already said why
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == decl.function:
                if _yields(node):
                    message = (
                        f"{decl.function} yields its events: here a sensor returns one {decl.emits} "
                        f"(or None) per call and a generator is refused; return one event, e.g. "
                        f"`return {decl.emits}(...)`, and fire others by hand: "
                        f"openloop playbooks fire {decl.emits} --field NAME=VALUE"
                    )
                    warnings.append(ConfigProblem(decl.file, node.lineno, "sensor", message))
    return warnings
