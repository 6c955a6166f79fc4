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
from config.problems import AgentConfigError, ConfigProblem, expand_error, field_path
from config.seed_form import Expansion, expand
from config.tool_grants import TOOLS_CONTEXT
from config.yaml_nodes import duplicate_keys, find_value, line_of, read_text_file, yaml_documents

__all__ = [
    "EXAMPLES_DIR",
    "AgentConfigError",
    "ConfigProblem",
    "converted_documents",
    "expanded_documents",
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


def _warnings(
    node: yaml.Node, expansion: Expansion, source: str, document: int | None
) -> list[ConfigProblem]:
    """What the file says that has no meaning here (left out), at the line the user wrote."""
    return [
        ConfigProblem(source, line_of(node, loc), field_path(loc), message, document)
        for loc, message in expansion.warnings
    ]


def _validate_expanded(
    node: yaml.Node,
    data: Any,
    source: str,
    document: int | None,
    tools: Tools,
    models: ModelCheck | None = None,
    warnings: Warnings = None,
) -> tuple[AgentConfig, Expansion]:
    """The agent and its data in today's form (the seed form's shapes rewritten by
    `config.seed_form`); every problem at the line the user wrote, group or list item;
    what the file says that means nothing here goes to `warnings`.
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
        for loc, line, message in duplicate_keys(node)
    ]
    expansion = expand(data, tools)
    if warnings is not None:
        warnings += [w for w in _warnings(node, expansion, source, document) if w not in warnings]
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
                line = line_of(node, at)
                warnings.append(ConfigProblem(source, line, field_path(at), finding.message, document))
    for loc, message in found:
        problems.append(ConfigProblem(source, line_of(node, loc), field_path(loc), message, document))
    if problems or config is None:
        # A problem in a group shows once per tool it grants: report it once.
        unique = list(dict.fromkeys(problems))
        raise AgentConfigError(sorted(unique, key=lambda p: (p.line or 0, p.field)))
    return config, expansion


def parse_agent_documents(
    text: str,
    source: str = "<string>",
    *,
    tools: Tools = None,
    models: ModelCheck | None = None,
    warnings: Warnings = None,
) -> list[AgentConfig]:
    """Every agent in `text` (documents separated by `---`); all problems reported at once."""
    documents = yaml_documents(text, source)
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
        line = line_of(node, ("metadata", "name")) or 0
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
    documents = yaml_documents(text, source)
    if len(documents) != 1:
        found = "no document" if not documents else f"{len(documents)} documents"
        raise AgentConfigError(
            [ConfigProblem(source, None, "", f"expected one agent document, found {found}")]
        )
    node, data = documents[0]
    return _validate(node, data, source, None, tools, models, warnings)


def converted_documents(path: str | Path, *, tools: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every agent in a file as data in today's form, once all of them validate."""
    return [expansion.data for _, expansion in expanded_documents(path, tools=tools)]


def expanded_documents(path: str | Path, *, tools: Mapping[str, str]) -> list[tuple[yaml.Node, Expansion]]:
    """Every agent in a file as read (its YAML node) and in today's form with what changed,
    once all of them validate."""
    source = str(path)
    documents = yaml_documents(read_text_file(Path(path)), source)
    if not documents:
        raise AgentConfigError([ConfigProblem(source, None, "", "no agent documents: the file is empty")])
    several = len(documents) > 1
    converted: list[tuple[yaml.Node, Expansion]] = []
    problems: list[ConfigProblem] = []
    for number, (node, data) in enumerate(documents, start=1):
        try:
            converted.append(
                (node, _validate_expanded(node, data, source, number if several else None, tools)[1])
            )
        except AgentConfigError as exc:
            problems += exc.problems
    if problems:
        raise AgentConfigError(problems)
    return converted


def value_location(path: str | Path, document: int, value: str) -> tuple[int | None, str]:
    """Line and field path of the first `value` in the `document`-th (0-based) agent of a
    file, as the user wrote it: for problems found after loading (a Slack name at apply)."""
    try:
        documents = yaml_documents(read_text_file(Path(path)), str(path))
    except AgentConfigError:
        return None, ""
    if document >= len(documents):
        return None, ""
    found = find_value(documents[document][0], value)
    return (found[0], field_path(found[1])) if found else (None, "")


def load_agent_file(
    path: str | Path, *, tools: Tools = None, models: ModelCheck | None = None, warnings: Warnings = None
) -> AgentConfig:
    """The one agent in a YAML file."""
    path = Path(path)
    return parse_agent(read_text_file(path), str(path), tools=tools, models=models, warnings=warnings)


def load_agent_documents(
    path: str | Path, *, tools: Tools = None, models: ModelCheck | None = None, warnings: Warnings = None
) -> list[AgentConfig]:
    """Every agent in a YAML file that may hold several documents separated by `---`."""
    path = Path(path)
    return parse_agent_documents(
        read_text_file(path), str(path), tools=tools, models=models, warnings=warnings
    )


EXAMPLES_DIR = Path(__file__).parent / "agents"


def example_agent(name: str, *, tools: Tools = None) -> AgentConfig:
    """One of the agents shipped in `config/agents/` (used by `up` and the tests)."""
    return load_agent_file(EXAMPLES_DIR / f"{name}.yaml", tools=tools)
