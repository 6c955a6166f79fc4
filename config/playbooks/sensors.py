"""Sensors read without running them: `sensors/*.py` parsed with `ast`, never imported.

    from config.playbooks.sensor import sensor          # or Loopy's `from loopy import sensor`

    @sensor(webhook="/hooks/sentry", emits="Incident")   # or poll="5m"
    def sentry_issues(request): ...

This reading is the one contract of a sensor: the compiler checks it, and the server and the
worker serve exactly what it declares (`activities.playbooks.sensor_code` imports a file only
when its reading has no problem, and takes each function's contract from here, not from what
the code did when it ran). So `emits`, `webhook` and `poll` must be string literals in an
`@sensor(...)` decorator of a top-level function, the decorator imported by its own name. What
cannot be read that way is refused with its file, line and fix, and its code never runs: a
declaration built at run time (a variable, a call, `sensor(...)(fn)`), the decorator imported
under another name, from elsewhere, not at all, or reached another way (`import ... as`, `*`,
`sensor.__call__`, `x.sensor`), the name rebound, a second decorator on a sensor, a sensor
function defined twice.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from config.fields import parse_duration
from config.problems import ConfigProblem

__all__ = ["SENSORS_DIR", "SensorDecl", "read_sensor_file", "read_sensors"]

SENSORS_DIR = "sensors"
DECORATOR = "sensor"
# Where the decorator is imported from; `loopy` is Loopy's spelling, served by
# `config.playbooks.loopy` when the sensors are loaded (`activities.playbooks.sensor_code`).
_MODULES = ("config.playbooks", "config.playbooks.sensor", "loopy")
_IMPORT = f"from config.playbooks.sensor import {DECORATOR}"
_KEYWORDS = ("emits", "webhook", "poll")
_EXAMPLES = {"emits": "Incident", "webhook": "/hooks/sentry", "poll": "5m"}
_WEBHOOK = re.compile(r"^/hooks/[a-z0-9][a-z0-9_-]*$")
_TOP_LEVEL = "declare a sensor with @sensor(...) on a top-level function, to be read without running it"


@dataclass(frozen=True)
class SensorDecl:
    """One sensor's contract, as its decorator declares it."""

    ref: str  # `module:function`, the module relative to the sensors folder (`sentry:issues`)
    file: str
    line: int
    emits: str
    webhook: str | None = None  # `/hooks/NAME`
    poll_seconds: float | None = None

    @property
    def function(self) -> str:
        return self.ref.rsplit(":", 1)[-1]


def _is_sensor(call: ast.expr) -> bool:
    target = call.func if isinstance(call, ast.Call) else call
    return isinstance(target, ast.Name) and target.id == DECORATOR


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _declaration(call: ast.expr, ref: str, source: str, problems: list[ConfigProblem]) -> SensorDecl | None:
    if not isinstance(call, ast.Call):
        message = 'a sensor declares what it emits: write @sensor(webhook="/hooks/NAME", emits="Event")'
        problems.append(ConfigProblem(source, call.lineno, "sensor", message))
        return None
    found: dict[str, str] = {}
    bad = len(problems)
    if call.args:
        message = 'write the arguments by name: @sensor(webhook="/hooks/NAME", emits="Event")'
        problems.append(ConfigProblem(source, call.lineno, "sensor", message))
    for keyword in call.keywords:
        name = keyword.arg or "**"
        if name not in _KEYWORDS:
            message = f"unknown argument {name!r}; a sensor takes {', '.join(_KEYWORDS)}"
            problems.append(ConfigProblem(source, keyword.value.lineno, name, message))
            continue
        value = _literal(keyword.value)
        if value is None:
            message = (
                f"`{name}` cannot be read without running the code; write it as a string literal, "
                f'e.g. {name}="{_EXAMPLES[name]}"'
            )
            problems.append(ConfigProblem(source, keyword.value.lineno, name, message))
            continue
        found[name] = value
    if "emits" not in found and not any(k.arg == "emits" for k in call.keywords):
        message = 'a sensor must declare the registered event it returns: add emits="EventName"'
        problems.append(ConfigProblem(source, call.lineno, "emits", message))
    triggers = [name for name in ("webhook", "poll") if any(k.arg == name for k in call.keywords)]
    if len(triggers) != 1:
        message = 'give exactly one trigger: webhook="/hooks/NAME" or poll="5m"'
        problems.append(ConfigProblem(source, call.lineno, "webhook", message))
    if "webhook" in found and not _WEBHOOK.match(found["webhook"]):
        message = (
            f"{found['webhook']!r}: a sensor's webhook is served at /hooks/NAME; write e.g. /hooks/sentry"
        )
        problems.append(ConfigProblem(source, call.lineno, "webhook", message))
    poll_seconds = None
    if "poll" in found:
        try:
            poll_seconds = parse_duration(found["poll"])
        except ValueError as exc:
            problems.append(ConfigProblem(source, call.lineno, "poll", str(exc)))
    if len(problems) > bad:
        return None
    return SensorDecl(ref, source, call.lineno, found["emits"], found.get("webhook"), poll_seconds)


def _imports(tree: ast.Module) -> list[tuple[int, str]]:
    """The decorator imported under another name, or a way to reach it that is not its name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in _MODULES:
            for alias in node.names:
                if alias.name == "*":
                    found.append(
                        (node.lineno, f"`import *` hides which name is the decorator; write {_IMPORT}")
                    )
                elif alias.name == DECORATOR and alias.asname not in (None, DECORATOR):
                    found.append(
                        (
                            node.lineno,
                            f"`sensor` imported as {alias.asname!r}: a sensor is read by the decorator's own "
                            f"name; write {_IMPORT} and decorate with @sensor(...)",
                        )
                    )
        elif isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == DECORATOR for a in node.names):
            found.append((node.lineno, f"another `sensor` is imported here; keep the name for {_IMPORT}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(_MODULES[0]) or alias.asname == DECORATOR:
                    message = f"`import {alias.name}`: import the decorator by its name instead: {_IMPORT}"
                    found.append((node.lineno, message))
    return found


def _imported(tree: ast.Module) -> bool:
    """Whether the module's top level imports the decorator by its name."""
    return any(
        isinstance(node, ast.ImportFrom)
        and node.level == 0
        and node.module in _MODULES
        and any(a.name == DECORATOR and a.asname in (None, DECORATOR) for a in node.names)
        for node in tree.body
    )


def _root(node: ast.expr) -> str | None:
    """`config` for `config.playbooks.sensor`: the name an attribute chain starts from."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _stray_uses(tree: ast.Module, allowed: set[int]) -> list[tuple[int, str]]:
    """`sensor` anywhere but a top-level function's decorator, and the name rebound."""
    applied = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)} | {
        id(d.func if isinstance(d, ast.Call) else d)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for d in node.decorator_list
    }  # called, or used as a decorator
    modules = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == DECORATOR and id(node) not in allowed:
            if not isinstance(node.ctx, ast.Load):
                found.append((node.lineno, f"`sensor` is assigned here; keep the name for {_IMPORT}"))
            elif id(node) in applied:
                found.append((node.lineno, _TOP_LEVEL))
            else:
                message = "`sensor` used as a value (e.g. sensor.__call__, an alias); " + _TOP_LEVEL
                found.append((node.lineno, message))
        elif isinstance(node, ast.Attribute) and node.attr == DECORATOR:
            if id(node) not in applied and _root(node) not in modules:
                continue  # a value's own `.sensor` (a payload's, say), not the decorator
            message = f"the decorator reached as an attribute; write {_IMPORT} and use @sensor(...)"
            found.append((node.lineno, message))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.arg)):
            name = node.arg if isinstance(node, ast.arg) else node.name
            if name == DECORATOR:
                found.append((node.lineno, f"a second `sensor` is defined here; keep the name for {_IMPORT}"))
    return found


def _bindings(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    """The module's top-level statements that bind each name."""
    found: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in node.names]
        for name in names:
            found.setdefault(name, []).append(node)
    return found


def read_sensor_file(
    path: Path, ref_module: str, source: str
) -> tuple[list[SensorDecl], list[ConfigProblem]]:
    """The sensors one file declares, and every reason it cannot be read without running it."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=source)
    except SyntaxError as exc:
        return [], [ConfigProblem(source, exc.lineno, "", f"not valid Python: {exc.msg}")]
    except (OSError, UnicodeDecodeError) as exc:
        return [], [ConfigProblem(source, None, "", f"cannot read: {exc}")]
    declared: list[SensorDecl] = []
    problems: list[ConfigProblem] = []
    allowed: set[int] = set()
    bindings = _bindings(tree)
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        marks = [d for d in node.decorator_list if _is_sensor(d)]
        allowed.update(id(d.func if isinstance(d, ast.Call) else d) for d in marks)
        if not marks:
            continue
        if isinstance(node, ast.ClassDef) or len(node.decorator_list) > 1:
            message = (
                "@sensor(...) marks a function, not a class"
                if isinstance(node, ast.ClassDef)
                else "@sensor(...) goes alone on a function: another decorator changes what is served"
            )
            problems.append(ConfigProblem(source, marks[0].lineno, "sensor", message))
            continue
        again = [other.lineno for other in bindings[node.name] if other is not node]
        if again:
            message = (
                f"{node.name!r} is bound again on line {again[0]}; give the sensor function its own name"
            )
            problems.append(ConfigProblem(source, marks[0].lineno, "sensor", message))
            continue
        decl = _declaration(marks[0], f"{ref_module}:{node.name}", source, problems)
        if decl is not None:
            declared.append(decl)
    if declared and not _imported(tree):
        message = f"the decorator is not imported; add {_IMPORT} at the top of the file"
        problems.append(ConfigProblem(source, declared[0].line, "sensor", message))
    for line, message in dict.fromkeys(_imports(tree) + _stray_uses(tree, allowed)):
        problems.append(ConfigProblem(source, line, "sensor", message))
    return declared, problems


def read_sensors(root: Path) -> tuple[list[SensorDecl], list[ConfigProblem]]:
    """Every sensor under `root/sensors/`, read statically."""
    folder = root / SENSORS_DIR
    declared: list[SensorDecl] = []
    problems: list[ConfigProblem] = []
    if not folder.is_dir():
        return declared, problems
    for path in sorted(folder.rglob("*.py")):
        relative = path.relative_to(folder).with_suffix("")
        module = ".".join(relative.parts)
        found, wrong = read_sensor_file(path, module, str(path))
        declared += found
        problems += wrong
    return declared, problems
