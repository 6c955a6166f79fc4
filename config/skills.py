"""Skills: folders holding a `SKILL.md` (YAML frontmatter, then Markdown) and resources.

    config/skills/triage/SKILL.md
    ---
    name: triage                      # 1-64 of [a-z0-9-], equal to the folder's name
    description: "When and how to triage a CI failure"   # up to 1,024 characters
    allowed-tools: [github.get_job_log]   # optional; can only narrow the agent's tools
    ---
    The instructions, loaded by the model with `skill.load` when it needs them.

A skill that would be silently dropped elsewhere (frontmatter YAML that breaks on an
unquoted `: `, a name that is not its folder's, a resource path leaving the folder) is an
error here with file, line and field. Pure: reading files and parsing, no network.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from config.problems import AgentConfigError, ConfigProblem
from config.yaml_safe import AliasBombError, SafeLoader

SKILL_FILE = "SKILL.md"
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")
MAX_DESCRIPTION = 1024
MAX_RESOURCE_BYTES = 256 * 1024
KNOWN_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
DEFAULT_DIR = Path(__file__).parent / "skills"


@dataclass(frozen=True)
class Skill:
    ref: str  # its path under the skills folder, e.g. rubrics/fix-quality
    name: str
    description: str
    body: str
    allowed_tools: tuple[str, ...] = ()
    resources: dict[str, str] = field(default_factory=dict)  # relative path -> text
    frontmatter: dict[str, Any] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """Of everything a task may read from the skill: its version's identity."""
        digest = hashlib.sha256(f"{self.name}\n{self.description}\n{self.body}".encode())
        for path in sorted(self.resources):
            digest.update(f"\n{path}\n{self.resources[path]}".encode())
        return digest.hexdigest()


def load_skill(folder: Path, root: Path | None = None) -> Skill:
    """The skill in `folder`; raises AgentConfigError naming the file, line and field."""
    path = folder / SKILL_FILE
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentConfigError(
            [ConfigProblem(source, None, "", f"cannot read: {exc.strerror or exc}")]
        ) from None
    front, body = _split(text, source)
    problems = _check(front, folder.name, source, text)
    if problems:
        raise AgentConfigError(problems)
    resources, resource_problems = _resources(folder)
    if resource_problems:
        raise AgentConfigError(resource_problems)
    ref = folder.relative_to(root).as_posix() if root is not None else folder.name
    tools = front.get("allowed-tools") or []
    if isinstance(tools, str):
        tools = tools.split()
    return Skill(
        ref=ref,
        name=str(front["name"]),
        description=str(front["description"]).strip(),
        body=body.strip(),
        allowed_tools=tuple(str(tool) for tool in tools),
        resources=resources,
        frontmatter=front,
    )


def load_skills(root: Path, refs: list[str]) -> list[Skill]:
    """The skills an agent names, resolved against `root`; every problem reported at once."""
    skills: list[Skill] = []
    problems: list[ConfigProblem] = []
    for ref in refs:
        folder = (root / ref).resolve()
        if root.resolve() not in folder.parents or not (folder / SKILL_FILE).is_file():
            problems.append(
                ConfigProblem(
                    str(root / ref), None, "", f"no skill {ref!r}: expected {root / ref / SKILL_FILE}"
                )
            )
            continue
        try:
            skills.append(load_skill(folder, root.resolve()))
        except AgentConfigError as exc:
            problems += exc.problems
    if problems:
        raise AgentConfigError(problems)
    return skills


def find_skills(root: Path) -> list[str]:
    """Every skill folder under `root`, as refs."""
    return sorted(path.parent.relative_to(root).as_posix() for path in root.rglob(SKILL_FILE))


def _split(text: str, source: str) -> tuple[dict[str, Any], str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise AgentConfigError(
            [ConfigProblem(source, 1, "", "SKILL.md must start with a '---' line, then YAML frontmatter")]
        )
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---"), None)
    if end is None:
        raise AgentConfigError([ConfigProblem(source, 1, "", "the frontmatter has no closing '---' line")])
    try:
        front = yaml.load("".join(lines[1:end]), Loader=SafeLoader) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else None
        hint = (
            ""
            if isinstance(exc, AliasBombError)
            else " (quote a value that holds ': ', e.g. description: \"When: ...\")"
        )
        raise AgentConfigError(
            [
                ConfigProblem(
                    source, line, "", f"frontmatter is not valid YAML: {getattr(exc, 'problem', exc)}{hint}"
                )
            ]
        ) from None
    if not isinstance(front, dict):
        raise AgentConfigError([ConfigProblem(source, 2, "", "the frontmatter must be a mapping of keys")])
    return front, "".join(lines[end + 1 :])


def _line(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return number
    return None


def _check(front: dict[str, Any], folder: str, source: str, text: str) -> list[ConfigProblem]:
    problems = []
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or not NAME.match(name):
        problems.append(
            ConfigProblem(
                source, _line(text, "name") or 2, "name", f"{name!r} must be 1-64 of a-z, 0-9 and -"
            )
        )
    elif name != folder:
        problems.append(
            ConfigProblem(
                source,
                _line(text, "name"),
                "name",
                f"{name!r} differs from its folder {folder!r}; rename one",
            )
        )
    if not isinstance(description, str) or not description.strip():
        problems.append(
            ConfigProblem(
                source,
                _line(text, "description") or 2,
                "description",
                "a skill needs a description (when to use it)",
            )
        )
    elif len(description) > MAX_DESCRIPTION:
        problems.append(
            ConfigProblem(
                source,
                _line(text, "description"),
                "description",
                f"{len(description)} characters; at most {MAX_DESCRIPTION}",
            )
        )
    for key in front:
        if key not in KNOWN_KEYS:
            problems.append(
                ConfigProblem(
                    source, _line(text, str(key)), str(key), f"unknown key; allowed: {', '.join(KNOWN_KEYS)}"
                )
            )
    tools = front.get("allowed-tools")
    if tools is not None and not isinstance(tools, (list, str)):
        problems.append(
            ConfigProblem(source, _line(text, "allowed-tools"), "allowed-tools", "a list of tool names")
        )
    return problems


def _resources(folder: Path) -> tuple[dict[str, str], list[ConfigProblem]]:
    resources: dict[str, str] = {}
    problems = []
    root = folder.resolve()
    for path in sorted(folder.rglob("*")):
        if path.is_dir() or (path.name == SKILL_FILE and path.parent == folder):
            continue
        real = path.resolve()
        if root not in real.parents:
            problems.append(
                ConfigProblem(
                    str(path),
                    None,
                    "",
                    f"a resource leaving the skill folder ({real}); keep resources inside it",
                )
            )
            continue
        if real.stat().st_size > MAX_RESOURCE_BYTES:
            problems.append(
                ConfigProblem(
                    str(path), None, "", f"over {MAX_RESOURCE_BYTES // 1024} KB; keep resources small"
                )
            )
            continue
        resources[path.relative_to(folder).as_posix()] = real.read_text(encoding="utf-8", errors="replace")
    return resources, problems
