"""Load agent YAML files into `AgentConfig`, with errors a person can act on.

Every error names the file, the line, the field path and what is allowed, so a bad file
never reaches a running task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from config.agent import AgentConfig


@dataclass(frozen=True)
class ConfigProblem:
    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class AgentConfigError(Exception):
    """One or more problems in an agent file; `str()` lists each on its own line."""

    def __init__(self, problems: list[ConfigProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def _line_of(node: yaml.Node | None, path: tuple[str | int, ...]) -> int | None:
    """1-based line of the deepest node of `path` present in the composed YAML."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in path:
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
            if child is None:
                # An unknown key: point at the key itself.
                key_node = next((k for k, _ in node.value if getattr(k, "value", None) == key), None)
                return key_node.start_mark.line + 1 if key_node is not None else line
            node = child
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            break
        line = node.start_mark.line + 1
    return line


def _describe(error: dict[str, Any]) -> str:
    kind = error["type"]
    message = str(error["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return "unknown key; remove it or check its spelling against the config reference"
    if kind == "literal_error":
        return message.replace("Input should be", "allowed values are")
    if kind == "missing":
        return "required field is missing"
    if kind in ("greater_than_equal", "greater_than") and "0" in message:
        return f"{message} (negative values are not allowed)"
    return message


def _field_path(loc: tuple[str | int, ...]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts[-1 if parts else 0 :] = [f"{parts[-1] if parts else ''}[{part}]"]
        else:
            parts.append(str(part))
    return ".".join(parts)


def parse_agent(text: str, source: str = "<string>") -> AgentConfig:
    """Parse one agent document from YAML text; raise AgentConfigError naming `source`."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise AgentConfigError([ConfigProblem(source, line, "", f"not valid YAML: {problem}")])
    if not isinstance(data, dict):
        raise AgentConfigError(
            [ConfigProblem(source, 1, "", "expected a mapping with apiVersion, kind, metadata, spec")]
        )
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if not str(p).startswith("function-"))
            problems.append(
                ConfigProblem(source, _line_of(node, loc), _field_path(loc), _describe(dict(error)))
            )
        raise AgentConfigError(problems) from None


def load_agent_file(path: str | Path) -> AgentConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentConfigError([ConfigProblem(str(path), None, "", f"cannot read: {exc.strerror}")])
    return parse_agent(text, str(path))


EXAMPLES_DIR = Path(__file__).parent / "agents"


def example_agent(name: str) -> AgentConfig:
    """One of the agents shipped in `config/agents/` (used by `up` and the tests)."""
    return load_agent_file(EXAMPLES_DIR / f"{name}.yaml")
