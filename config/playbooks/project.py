"""Where a project's files are: OpenLoop's playbooks folder or a Loopy project, read as written.

    playbooks/                         a Loopy project
      registry.yaml                      registry.yml (or .yaml)
      <playbook>/<step>.md               workflows/<workflow>/<step>.md
      sensors/*.py                       sensors/*.py
                                         skills/<skill>/SKILL.md

With a `workflows/` folder, each folder in it is a playbook and the project's other top-level
files (README.md, ORIGIN.md, env examples) are not steps. A folder in which no step is found is
an error naming what was found and what was expected, never an empty success; only a registry
with no folder beside it is a warning (the last playbook removed: applying retires them all).
"""

from __future__ import annotations

from pathlib import Path

from config.problems import ConfigProblem

__all__ = [
    "REGISTRY_FILES",
    "SKILLS_DIR",
    "WORKFLOWS_DIR",
    "nothing_found",
    "playbook_folders",
    "registry_path",
]

REGISTRY_FILES = ("registry.yaml", "registry.yml")
WORKFLOWS_DIR = "workflows"
SKILLS_DIR = "skills"
SENSORS_DIR = "sensors"
NOT_PLAYBOOKS = (SENSORS_DIR, SKILLS_DIR, WORKFLOWS_DIR, "secrets")
_SHOWN = 8


def registry_path(root: Path) -> tuple[Path, list[ConfigProblem]]:
    """The project's registry file (`registry.yaml` when there is none), or a problem when two
    spellings are there and it is unclear which one counts."""
    found = [root / name for name in REGISTRY_FILES if (root / name).is_file()]
    if len(found) > 1:
        message = f"both {found[0].name} and {found[1].name} are here; keep one (they are the same file)"
        return found[0], [ConfigProblem(str(found[1]), None, "", message)]
    return (found[0] if found else root / REGISTRY_FILES[0]), []


def _is_step(path: Path) -> bool:
    return path.suffix == ".md" and path.name.lower() != "readme.md"


def playbook_folders(root: Path) -> tuple[list[Path], list[ConfigProblem]]:
    """The folders holding playbooks' steps, and step files left where no playbook is."""
    workflows = root / WORKFLOWS_DIR
    base = workflows if workflows.is_dir() else root
    problems = [
        ConfigProblem(
            str(stray),
            1,
            "",
            f"a step belongs in a playbook's folder: move it to {base / 'NAME' / stray.name}",
        )
        for stray in sorted(base.glob("*.md"))
        if _is_step(stray)
    ]
    folders = [
        folder
        for folder in sorted(base.iterdir())
        if folder.is_dir()
        and not folder.name.startswith((".", "_"))
        and (base is workflows or folder.name not in NOT_PLAYBOOKS)
    ]
    return folders, problems


def _found(root: Path) -> str:
    entries = sorted(root.iterdir(), key=lambda p: p.name)
    shown = [f"{p.name}/" if p.is_dir() else p.name for p in entries if not p.name.startswith(".")]
    more = f" and {len(shown) - _SHOWN} more" if len(shown) > _SHOWN else ""
    return ", ".join(shown[:_SHOWN]) + more if shown else "nothing"


def nothing_found(root: Path, folders: list[Path], has_registry: bool) -> ConfigProblem:
    """The error for a folder in which no step file was found; only a registry and no folder at
    all is the one deliberate empty project (applying it retires every playbook), a warning
    with the field `registry`."""
    if has_registry and not folders and not (root / WORKFLOWS_DIR).is_dir():
        message = "no playbooks here, only the registry: applying this folder retires every applied playbook"
        return ConfigProblem(str(root), None, "registry", message)
    inside = (
        f"; the folders looked in hold no .md step: {', '.join(f.name for f in folders)}" if folders else ""
    )
    message = (
        f"no playbook steps found (found: {_found(root)}{inside}); expected step files at "
        f"{root / 'NAME' / 'STEP.md'} or, in a Loopy project, {root / WORKFLOWS_DIR / 'NAME' / 'STEP.md'}, "
        f"each starting with '---' frontmatter; `openloop playbooks init` writes an example"
    )
    return ConfigProblem(str(root), None, "", message)
