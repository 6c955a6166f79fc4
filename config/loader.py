"""Load agent YAML files into `AgentConfig`, with errors a person can act on.

Every problem names the file, the line, the field path (`spec.tools[2].permissions`) and
what is allowed there, so a bad file never reaches a running task. Nothing here raises
anything but `AgentConfigError` for bad input: a user sees a list of problems, never a
traceback. A file may hold several agents as YAML documents separated by `---`.

This module reads the YAML and finds lines; `config.problems` holds the problem types and
turns pydantic's errors into the messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from config.agent import AgentConfig
from config.model_names import ModelCheck, model_names
from config.problems import AgentConfigError, ConfigProblem, Loc, expand_error, field_path
from config.seed_form import expand
from config.tool_grants import TOOLS_CONTEXT
from config.yaml_safe import SafeLoader

__all__ = [
    "EXAMPLES_DIR",
    "AgentConfigError",
    "ConfigProblem",
    "converted_documents",
    "example_agent",
    "field_path",
    "load_agent_documents",
    "load_agent_file",
    "parse_agent",
    "parse_agent_documents",
    "value_location",
]

# The runnable tools and the permission each needs (`activities.tools.catalog.tool_permissions`).
# Every path a person applies an agent through passes it; None skips the tool check.
Tools = Mapping[str, str] | None

# Warnings found while loading (a model LiteLLM does not know): the caller's list to fill.
Warnings = list[ConfigProblem] | None

# The project's one YAML loader: safe, libyaml's parser when present, aliases bounded.
_Loader = SafeLoader


def _line_of(node: yaml.Node | None, path: Loc) -> int | None:
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


def _duplicate_keys(
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
                found += _duplicate_keys(value, (*loc, name), seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found += _duplicate_keys(item, (*loc, index), seen_nodes)
    return found


def _documents(text: str, source: str) -> list[tuple[yaml.Node, Any]]:
    """Every non-empty YAML document in `text` as (node, data), or an error naming the line."""
    documents: list[tuple[yaml.Node, Any]] = []
    loader: Any = None
    try:
        loader = _Loader(text)  # checks for unprintable characters first
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


def _validate(
    node: yaml.Node,
    data: Any,
    source: str,
    document: int | None,
    tools: Tools,
    models: ModelCheck | None = None,
    warnings: Warnings = None,
) -> AgentConfig:
    return _validate_expanded(node, data, source, document, tools, models, warnings)[0]


def _validate_expanded(
    node: yaml.Node,
    data: Any,
    source: str,
    document: int | None,
    tools: Tools,
    models: ModelCheck | None = None,
    warnings: Warnings = None,
) -> tuple[AgentConfig, dict[str, Any]]:
    """The agent and its data in today's form (the seed form's shapes rewritten by
    `config.seed_form`); every problem at the line the user wrote, group or list item.
    `models` checks each model name (None skips it): its errors are problems, its warnings
    go to `warnings`."""
    if not isinstance(data, dict):
        line = node.start_mark.line + 1
        raise AgentConfigError(
            [
                ConfigProblem(
                    source,
                    line,
                    "",
                    "not an agent document: expected a mapping with apiVersion, kind, metadata, "
                    f"spec (got {type(data).__name__})",
                    document,
                )
            ]
        )
    problems = [
        ConfigProblem(source, line, field_path(loc), message, document)
        for loc, line, message in _duplicate_keys(node)
    ]
    expansion = expand(data, tools)
    found = list(expansion.problems)
    config: AgentConfig | None = None
    try:
        config = AgentConfig.model_validate(
            expansion.data, context=None if tools is None else {TOOLS_CONTEXT: tools}
        )
    except ValidationError as exc:
        for error in exc.errors():
            found += [(expansion.original(loc), message) for loc, message in expand_error(dict(error))]
    if config is not None:
        found += [(expansion.original(loc), message) for loc, message in config.name_problems()]
    if config is not None and models is not None:
        for loc, name in model_names(config):
            finding = models(name)
            if finding is None:
                continue
            at = expansion.original(loc)
            if finding.error:
                found.append((at, finding.message))
            elif warnings is not None:
                line = _line_of(node, at)
                warnings.append(ConfigProblem(source, line, field_path(at), finding.message, document))
    for loc, message in found:
        problems.append(ConfigProblem(source, _line_of(node, loc), field_path(loc), message, document))
    if problems or config is None:
        # A problem in a group shows once per tool it grants: report it once.
        unique = list(dict.fromkeys(problems))
        raise AgentConfigError(sorted(unique, key=lambda p: (p.line or 0, p.field)))
    return config, expansion.data


def parse_agent_documents(
    text: str,
    source: str = "<string>",
    *,
    tools: Tools = None,
    models: ModelCheck | None = None,
    warnings: Warnings = None,
) -> list[AgentConfig]:
    """Every agent in `text` (documents separated by `---`); all problems reported at once."""
    documents = _documents(text, source)
    if not documents:
        raise AgentConfigError([ConfigProblem(source, None, "", "no agent documents: the file is empty")])
    several = len(documents) > 1
    configs: list[AgentConfig] = []
    problems: list[ConfigProblem] = []
    first_line: dict[tuple[str, str], int] = {}
    for number, (node, data) in enumerate(documents, start=1):
        try:
            config = _validate(node, data, source, number if several else None, tools, models, warnings)
        except AgentConfigError as exc:
            problems += exc.problems
            continue
        key = (config.workspace, config.name)
        line = _line_of(node, ("metadata", "name")) or 0
        if key in first_line:
            problems.append(
                ConfigProblem(
                    source,
                    line,
                    "metadata.name",
                    f"agent {config.name!r} in workspace {config.workspace!r} is already "
                    f"defined on line {first_line[key]}; give each agent its own name",
                    number,
                )
            )
        first_line.setdefault(key, line)
        configs.append(config)
    if problems:
        raise AgentConfigError(problems)
    return configs


def parse_agent(
    text: str,
    source: str = "<string>",
    *,
    tools: Tools = None,
    models: ModelCheck | None = None,
    warnings: Warnings = None,
) -> AgentConfig:
    """Parse one agent document from YAML text; raise AgentConfigError naming `source`."""
    documents = _documents(text, source)
    if len(documents) != 1:
        found = "no document" if not documents else f"{len(documents)} documents"
        raise AgentConfigError(
            [ConfigProblem(source, None, "", f"expected one agent document, found {found}")]
        )
    node, data = documents[0]
    return _validate(node, data, source, None, tools, models, warnings)


def converted_documents(path: str | Path, *, tools: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every agent in a file as data in today's form, once all of them validate."""
    source = str(path)
    documents = _documents(_read(Path(path)), source)
    if not documents:
        raise AgentConfigError([ConfigProblem(source, None, "", "no agent documents: the file is empty")])
    several = len(documents) > 1
    converted: list[dict[str, Any]] = []
    problems: list[ConfigProblem] = []
    for number, (node, data) in enumerate(documents, start=1):
        try:
            converted.append(_validate_expanded(node, data, source, number if several else None, tools)[1])
        except AgentConfigError as exc:
            problems += exc.problems
    if problems:
        raise AgentConfigError(problems)
    return converted


def _find_value(node: yaml.Node, value: str, loc: Loc = ()) -> tuple[int, Loc] | None:
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
        found = _find_value(item, value, (*loc, key))
        if found is not None:
            return found
    return None


def value_location(path: str | Path, document: int, value: str) -> tuple[int | None, str]:
    """Line and field path of the first `value` in the `document`-th (0-based) agent of a
    file, as the user wrote it: for problems found after loading (a Slack name at apply)."""
    try:
        documents = _documents(_read(Path(path)), str(path))
    except AgentConfigError:
        return None, ""
    if document >= len(documents):
        return None, ""
    found = _find_value(documents[document][0], value)
    return (found[0], field_path(found[1])) if found else (None, "")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        problem = ConfigProblem(str(path), None, "", "cannot read: not UTF-8 text")
        raise AgentConfigError([problem]) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        problem = ConfigProblem(str(path), None, "", f"cannot read: {reason}")
        raise AgentConfigError([problem]) from None


def load_agent_file(
    path: str | Path, *, tools: Tools = None, models: ModelCheck | None = None, warnings: Warnings = None
) -> AgentConfig:
    """The one agent in a YAML file."""
    path = Path(path)
    return parse_agent(_read(path), str(path), tools=tools, models=models, warnings=warnings)


def load_agent_documents(
    path: str | Path, *, tools: Tools = None, models: ModelCheck | None = None, warnings: Warnings = None
) -> list[AgentConfig]:
    """Every agent in a YAML file that may hold several documents separated by `---`."""
    path = Path(path)
    return parse_agent_documents(_read(path), str(path), tools=tools, models=models, warnings=warnings)


EXAMPLES_DIR = Path(__file__).parent / "agents"


def example_agent(name: str, *, tools: Tools = None) -> AgentConfig:
    """One of the agents shipped in `config/agents/` (used by `up` and the tests)."""
    return load_agent_file(EXAMPLES_DIR / f"{name}.yaml", tools=tools)
