"""Sensors read without running them: `sensors/*.py` parsed with `ast`, never imported.

    from config.playbooks.sensor import sensor

    @sensor(webhook="/hooks/sentry", emits="Incident")   # or poll="5m"
    def sentry_issues(request): ...

The compiler needs each sensor's contract (what it emits, what triggers it) before anything
runs, so `emits`, `webhook` and `poll` must be string literals in the decorator of a
top-level function. A declaration built at run time (a variable, a call, `sensor(...)(fn)`)
is refused: its file, line and argument are named, and its code is never executed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from config.fields import parse_duration
from config.problems import ConfigProblem

__all__ = ["SENSORS_DIR", "SensorDecl", "read_sensors"]

SENSORS_DIR = "sensors"
_KEYWORDS = ("emits", "webhook", "poll")
_EXAMPLES = {"emits": "Incident", "webhook": "/hooks/sentry", "poll": "5m"}
_WEBHOOK = re.compile(r"^/hooks/[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class SensorDecl:
    """One sensor's contract, as its decorator declares it."""

    ref: str  # `module:function`, the module relative to the sensors folder (`sentry:issues`)
    file: str
    line: int
    emits: str
    webhook: str | None = None  # `/hooks/NAME`
    poll_seconds: float | None = None


def _is_sensor(call: ast.expr) -> bool:
    target = call.func if isinstance(call, ast.Call) else call
    return (isinstance(target, ast.Name) and target.id == "sensor") or (
        isinstance(target, ast.Attribute) and target.attr == "sensor"
    )


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


def _read_file(path: Path, ref_module: str, source: str) -> tuple[list[SensorDecl], list[ConfigProblem]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=source)
    except SyntaxError as exc:
        return [], [ConfigProblem(source, exc.lineno, "", f"not valid Python: {exc.msg}")]
    except (OSError, UnicodeDecodeError) as exc:
        return [], [ConfigProblem(source, None, "", f"cannot read: {exc}")]
    declared: list[SensorDecl] = []
    problems: list[ConfigProblem] = []
    decorators: set[int] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                if _is_sensor(decorator):
                    decorators.add(id(decorator))
                    decl = _declaration(decorator, f"{ref_module}:{node.name}", source, problems)
                    if decl is not None:
                        declared.append(decl)
    for call in ast.walk(tree):
        # `sensor(...)` anywhere but on a top-level function is built at run time.
        if isinstance(call, ast.Call) and _is_sensor(call) and id(call) not in decorators:
            message = (
                "declare a sensor with @sensor(...) on a top-level function, to be read without running it"
            )
            problems.append(ConfigProblem(source, call.lineno, "sensor", message))
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
        found, wrong = _read_file(path, module, str(path))
        declared += found
        problems += wrong
    return declared, problems
