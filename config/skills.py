"""Skills: folders holding a `SKILL.md` (YAML frontmatter, then Markdown) and resources.

    config/skills/triage/SKILL.md
    ---
    name: triage                      # equal to the folder's name
    description: "When and how to triage a CI failure"
    allowed-tools: [github.get_job_log]   # optional; can only narrow the agent's tools
    ---
    The instructions, loaded by the model with `skill.load` when it needs them.

Every other file in the folder is a resource, kept as bytes (fonts, PDFs and archives as
well as text). The frontmatter rules are in `config.skill_frontmatter`, the resources and
their size limits in `config.skill_files`. A problem names its file, line and field; a
warning (a spec limit the ecosystem's own skills stretch) is kept on the skill for the
caller to print. Pure: reading files and parsing, no network.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.problems import AgentConfigError, ConfigProblem
from config.skill_files import SKILL_FILE, SkillLimits, read_resources
from config.skill_frontmatter import parse

DEFAULT_DIR = Path(__file__).parent / "skills"


@dataclass(frozen=True)
class Skill:
    ref: str  # its path under the skills folder, e.g. rubrics/fix-quality
    name: str
    description: str
    body: str
    allowed_tools: tuple[str, ...] = ()
    resources: dict[str, bytes] = field(default_factory=dict)  # relative path -> exact bytes
    frontmatter: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[ConfigProblem, ...] = ()

    @property
    def sha256(self) -> str:
        """Of everything a task may read from the skill: its version's identity."""
        digest = hashlib.sha256(f"{self.name}\n{self.description}\n{self.body}".encode())
        for path in sorted(self.resources):
            digest.update(f"\n{path}\n".encode() + self.resources[path])
        return digest.hexdigest()

    @property
    def size(self) -> int:
        return sum(len(data) for data in self.resources.values())


def load_skill(folder: Path, root: Path | None = None, limits: SkillLimits | None = None) -> Skill:
    """The skill in `folder`; raises AgentConfigError naming the file, line and field."""
    path = folder / SKILL_FILE
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AgentConfigError(
            [ConfigProblem(source, None, "", f"cannot read: {exc.strerror or exc}")]
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise AgentConfigError(
            [ConfigProblem(source, line, "", "not UTF-8 text; save SKILL.md as UTF-8")]
        ) from None
    front = parse(text, folder.name, source)
    if front.problems:
        raise AgentConfigError(front.problems)
    resources, problems = read_resources(folder.name, folder, limits or SkillLimits())
    if problems:
        raise AgentConfigError(problems)
    ref = folder.relative_to(root).as_posix() if root is not None else folder.name
    return Skill(
        ref=ref,
        name=str(front.keys["name"]),
        description=str(front.keys["description"]).strip(),
        body=front.body.strip(),
        allowed_tools=tuple(front.tools),
        resources=resources,
        frontmatter=front.keys,
        warnings=tuple(front.warnings),
    )


def load_skills(root: Path, refs: list[str], limits: SkillLimits | None = None) -> list[Skill]:
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
            skills.append(load_skill(folder, root.resolve(), limits))
        except AgentConfigError as exc:
            problems += exc.problems
    if problems:
        raise AgentConfigError(problems)
    return skills


def find_skills(root: Path) -> list[str]:
    """Every skill folder under `root`, as refs."""
    return sorted(path.parent.relative_to(root).as_posix() for path in root.rglob(SKILL_FILE))
