"""A SKILL.md's frontmatter: parsed, checked, and every problem worded with its line and fix.

The Agent Skills format asks for `name` (1-64 of a-z, 0-9 and -, equal to the folder's name)
and `description` (up to 1,024 characters). Skills published in the wild stretch it (one of
Anthropic's own descriptions runs past 1,024 characters; other tools add keys of their own and
name their own tools in `allowed-tools`), so those are warnings. What would break a task stays
an error: no frontmatter, YAML that does not parse, no name or description, a name that is not
its folder's (agents find a skill by its folder's name), `allowed-tools` that is not a list.
Pure: no file or network access.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from config.problems import ConfigProblem
from config.yaml_safe import AliasBombError, SafeLoader

NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")
MAX_DESCRIPTION = 1024
KNOWN_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
_EXAMPLE_DESCRIPTION = "What this skill does, and when to use it"
_MAX_SUGGESTED = 200
# One tool of an `allowed-tools` string: a name, with any arguments in parentheses.
_TOOL_NAME = re.compile(r"[^\s,()]+(?:\([^)]*\))?")
_QUOTE_HINT = " (quote a value that holds ': ', e.g. description: \"When: ...\")"


@dataclass
class Frontmatter:
    """What a SKILL.md says: its keys, its instructions, and what is wrong or merely unusual."""

    keys: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    problems: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)  # `allowed-tools` that can name a tool here


def parse(text: str, folder: str, source: str) -> Frontmatter:
    """Split and check `text`, the SKILL.md of the folder named `folder`."""
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        return Frontmatter(
            problems=[ConfigProblem(source, line, "", "a NUL byte in SKILL.md; it must be plain text")]
        )
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return Frontmatter(problems=[_no_frontmatter(text, folder, source)])
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---"), None)
    if end is None:
        problem = ConfigProblem(source, 1, "frontmatter", "no closing '---' line after the frontmatter")
        return Frontmatter(problems=[problem])
    try:
        keys = yaml.load("".join(lines[1:end]), Loader=SafeLoader) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = mark.line + 2 if mark is not None else None
        hint = "" if isinstance(exc, AliasBombError) else _QUOTE_HINT
        message = f"frontmatter is not valid YAML: {getattr(exc, 'problem', exc)}{hint}"
        return Frontmatter(problems=[ConfigProblem(source, at, "frontmatter", message)])
    if not isinstance(keys, dict):
        return Frontmatter(problems=[ConfigProblem(source, 2, "frontmatter", "must be a mapping of keys")])
    found = Frontmatter(keys=keys, body="".join(lines[end + 1 :]))
    _check_name(found, folder, source, text)
    _check_description(found, source, text)
    for key in keys:
        if key not in KNOWN_KEYS:
            found.warnings.append(
                ConfigProblem(
                    source,
                    _line(text, str(key)),
                    str(key),
                    f"not an Agent Skills key (those are {', '.join(KNOWN_KEYS)}); OpenLoop ignores it",
                )
            )
    tools = keys.get("allowed-tools")
    if tools is not None and not isinstance(tools, (list, str)):
        found.problems.append(
            ConfigProblem(
                source,
                _line(text, "allowed-tools"),
                "allowed-tools",
                "a list of tool names, or one string of them",
            )
        )
    elif tools:
        found.tools = _allowed_tools(found, tools, source, _line(text, "allowed-tools"))
    return found


def _allowed_tools(found: Frontmatter, tools: list[Any] | str, source: str, line: int | None) -> list[str]:
    """The names of `allowed-tools` that can be a tool here (`family.name`, as every tool of
    ours and every MCP tool is). The spec writes them space-separated and Claude Code skills
    comma-separated, with arguments in parentheses (`Bash(git add:*)`). A name of another
    product's tool (`Bash`, `Read`) is left out with a warning: kept, it would narrow the
    agent to no tool at all once the skill is loaded."""
    names = [str(t) for t in tools] if isinstance(tools, list) else _TOOL_NAME.findall(tools)
    ours = [name for name in names if "." in name.split("(", 1)[0]]
    foreign = [name for name in names if name not in ours]
    if foreign:
        narrowed = f"the agent is narrowed to {', '.join(ours)}" if ours else "the agent keeps its tools"
        found.warnings.append(
            ConfigProblem(
                source,
                line,
                "allowed-tools",
                f"{', '.join(foreign)} name no tool here (tools here are family.name, e.g. "
                f"github.create_issue); ignored: {narrowed} when the skill is loaded",
            )
        )
    return ours


def _check_name(found: Frontmatter, folder: str, source: str, text: str) -> None:
    name = found.keys.get("name")
    line = _line(text, "name")
    if not isinstance(name, str) or not name.strip():
        found.problems.append(
            ConfigProblem(source, line or 2, "name", f"a skill needs a name, its folder's: name: {folder}")
        )
    elif name != folder:
        found.problems.append(
            ConfigProblem(
                source,
                line,
                "name",
                f"{name!r} differs from its folder {folder!r}: agents find a skill by its folder's "
                "name; rename one",
            )
        )
    elif not NAME.match(name):
        found.warnings.append(
            ConfigProblem(
                source,
                line,
                "name",
                f"{name!r} is outside the Agent Skills name format (1-64 of a-z, 0-9 and -, "
                "not starting or ending with -); other tools may refuse it",
            )
        )


def _check_description(found: Frontmatter, source: str, text: str) -> None:
    description = found.keys.get("description")
    line = _line(text, "description")
    if not isinstance(description, str) or not description.strip():
        found.problems.append(
            ConfigProblem(
                source,
                line or 2,
                "description",
                "a skill needs a description: what it does and when to use it (the model "
                "chooses skills by it)",
            )
        )
    elif len(description) > MAX_DESCRIPTION:
        found.warnings.append(
            ConfigProblem(
                source,
                line,
                "description",
                f"{len(description)} characters, over the Agent Skills limit of {MAX_DESCRIPTION}; "
                "other tools may cut or refuse it",
            )
        )


def _no_frontmatter(text: str, folder: str, source: str) -> ConfigProblem:
    """The two fields to add, as a block ready to paste at the top of the file."""
    name = folder if NAME.match(folder) else re.sub(r"[^a-z0-9-]+", "-", folder.lower()).strip("-")
    example = f"---\nname: {name}\ndescription: {json.dumps(_first_sentence(text))}\n---"
    rename = "" if name == folder else f" (and rename the folder to {name!r})"
    return ConfigProblem(
        source,
        1,
        "frontmatter",
        "no YAML frontmatter: a skill starts with two fields, `name` (its folder's name) and "
        f"`description` (what it does and when to use it); paste this at the top{rename}:\n" + example,
    )


def _first_sentence(text: str) -> str:
    """The body's first line of prose, to start the description from; else a placeholder."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "```", "<!--")):
            return line[:_MAX_SUGGESTED]
    return _EXAMPLE_DESCRIPTION


def _line(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return number
    return None
