"""A project's own skills (`skills/<name>/SKILL.md`) and the agents its registry defines.

Loopy skills are often plain Markdown without frontmatter (`# triage` and a paragraph). The
skills store (`config.skills`) is asked first; when it refuses a file only for having no
frontmatter, the skill is read here: its name is the folder's, its description the first
heading (or paragraph), its body the whole file. A skill an agent names that the folder does
not hold is a warning at the agent's line (the agent runs without it), and each project agent
becomes the `AgentConfig` that `openloop playbooks apply` applies with the playbooks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from config.agent import AgentConfig
from config.playbooks.project import SKILLS_DIR
from config.playbooks.project_agents import OFFLINE_FALLBACK, ProjectAgent
from config.problems import AgentConfigError, ConfigProblem
from config.skills import Skill, find_skills, load_skill

__all__ = ["PROJECT_AGENT_MARK", "ProjectFiles", "agent_configs", "read_project_skills"]

PROJECT_AGENT_MARK = "Loopy agent "  # how the description of an agent made from a registry starts

SKILL_FILE = "SKILL.md"
SKILL_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")  # the skills store's rule
MAX_DESCRIPTION = 1024


@dataclass
class ProjectFiles:
    skills: list[Skill] = field(default_factory=list)
    problems: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)


def _description(text: str) -> str:
    """The first heading's text, else the first paragraph's, cut to the store's limit."""
    for block in text.strip().split("\n\n"):
        line = block.strip().splitlines()[0].strip() if block.strip() else ""
        if line:
            return " ".join(line.lstrip("#").split())[:MAX_DESCRIPTION] or "a skill"
    return "a skill"


def _without_frontmatter(folder: Path, ref: str) -> Skill | ConfigProblem:
    path = folder / SKILL_FILE
    text = path.read_text(encoding="utf-8")
    name = folder.name
    if not SKILL_NAME.match(name):
        message = f"{name!r}: a skill's folder is its name: 1-64 of lowercase letters, digits and -"
        return ConfigProblem(str(path), None, "", message)
    return Skill(ref=ref, name=name, description=_description(text), body=text.strip())


def read_project_skills(root: Path) -> ProjectFiles:
    """Every skill in `root/skills/`."""
    out = ProjectFiles()
    folder = root / SKILLS_DIR
    if not folder.is_dir():
        return out
    for ref in find_skills(folder):
        try:
            out.skills.append(load_skill(folder / ref, folder))
            continue
        except AgentConfigError as exc:
            refused = exc.problems
        text = (folder / ref / SKILL_FILE).read_text(encoding="utf-8", errors="replace")
        if text.lstrip().startswith("---"):
            out.problems += refused  # it has frontmatter, and it is wrong
            continue
        made = _without_frontmatter(folder / ref, ref)
        if isinstance(made, ConfigProblem):
            out.problems.append(made)
        else:
            out.skills.append(made)
    return out


def agent_configs(
    agents: dict[str, ProjectAgent], skills: list[Skill], registry: str
) -> tuple[list[AgentConfig], list[ConfigProblem]]:
    """The project's agents as OpenLoop agents, and a warning per skill they name that is missing."""
    refs = {skill.ref for skill in skills}
    where = f"from {Path(registry).resolve()}"
    configs: list[AgentConfig] = []
    warnings: list[ConfigProblem] = []
    for agent in agents.values():
        missing = [ref for ref in agent.skills if ref not in refs]
        for ref in missing:
            found = ", ".join(sorted(refs)) or "none"
            message = (
                f"{agent.written}: no skill {ref!r} in {SKILLS_DIR}/ (found: {found}); it runs without it"
            )
            warnings.append(ConfigProblem(registry, agent.line, f"agents.{agent.written}.skills", message))
        spec = {
            "instructions": f"You are {agent.written}, an agent of this project's playbooks.",
            "model_policy": {"default": agent.model, "fallbacks": [OFFLINE_FALLBACK]},
            "skills": [ref for ref in agent.skills if ref in refs],
        }
        configs.append(
            AgentConfig.model_validate(
                {
                    "apiVersion": "openloop.ai/v1alpha1",
                    "kind": "Agent",
                    "metadata": {
                        "name": agent.name,
                        "description": f"{PROJECT_AGENT_MARK}{agent.written}, {where}",
                    },
                    "spec": spec,
                }
            )
        )
    return configs, warnings
