"""Where the skills commands find skills: folders on disk, and the skills already applied.

`openloop skills validate|apply` take skill folders (a path holding a SKILL.md, a folder of
such folders, or a name under the skills folder) and check each one on its own, printed
like the other validators. An agent's `spec.skills` resolve against the skills folder on
disk first (so `agents apply` applies what it finds there), then against the applied skills
in Postgres; a name found in neither is an error saying how to apply it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from rich.console import Console
from rich.markup import escape

from config.agent import AgentConfig
from config.problems import AgentConfigError, ConfigProblem
from config.settings import Settings
from config.skill_files import SKILL_FILE, SkillLimits, size_text
from config.skills import DEFAULT_DIR, Skill, find_skills, load_skill

CONNECT_TIMEOUT_S = 5  # a wrong address should fail fast, not hang the terminal


@dataclass
class Checked:
    """One skill folder's result: the skill, or the problems that keep it out."""

    source: str  # its SKILL.md, as the user should open it
    skill: Skill | None = None
    problems: list[ConfigProblem] = field(default_factory=list)


def skills_dir() -> Path:
    return Settings.from_env().skills_dir or DEFAULT_DIR


def limits() -> SkillLimits:
    settings = Settings.from_env()
    return SkillLimits(settings.skill_max_file_bytes, settings.skill_max_bytes)


def check_folders(args: list[str] | None) -> list[Checked]:
    """Each skill `args` name (default: all under the skills folder), checked on its own."""
    root = skills_dir()
    targets: list[tuple[Path, Path] | Checked] = []
    for arg in args or [str(root)]:
        path = Path(arg).expanduser()
        if (path / SKILL_FILE).is_file():
            targets.append((path, path.parent))
        elif path.is_dir() and find_skills(path):
            targets += [(path / ref, path) for ref in find_skills(path)]
        elif (root / arg / SKILL_FILE).is_file():
            targets.append((root / arg, root))
        else:
            message = (
                f"no skill here: neither a folder holding {SKILL_FILE} nor a skill under {root} "
                "(set OPENLOOP_SKILLS_DIR to the folder holding your skills)"
            )
            targets.append(Checked(arg, problems=[ConfigProblem(arg, None, "", message)]))
    return [target if isinstance(target, Checked) else _check(*target) for target in targets]


def _check(folder: Path, root: Path) -> Checked:
    source = str(folder / SKILL_FILE)
    try:
        return Checked(source, load_skill(folder, root, limits()))
    except AgentConfigError as exc:
        return Checked(source, problems=exc.problems)


def print_checked(console: Console, results: list[Checked]) -> bool:
    """One line per skill, ✓ or ✗, then its problems and warnings; True when all are good."""
    for result in results:
        if result.skill is None:
            count = f"{len(result.problems)} problem{'s' if len(result.problems) > 1 else ''}"
            console.print(f"[red]✗[/red] {escape(result.source)}: {count}")
            print_problems(console, result.problems)
            continue
        skill = result.skill
        files = f"{len(skill.resources)} file{'' if len(skill.resources) == 1 else 's'}"
        console.print(
            f"[green]✓[/green] {escape(result.source)}: OK: {escape(skill.name)} "
            f"({files}, {size_text(skill.size)})"
        )
        print_problems(console, list(skill.warnings), warning=True)
    return all(result.skill is not None for result in results)


def print_problems(console: Console, problems: list[ConfigProblem], warning: bool = False) -> None:
    marker = "[yellow]warning[/yellow] " if warning else ""
    for problem in problems:
        first, *rest = str(problem).splitlines()
        console.print(f"  {marker}{escape(first)}")
        for line in rest:  # a ready-to-paste example keeps its own lines
            console.print(f"    {escape(line)}")


def agent_skills(loaded: list[tuple[Path, list[AgentConfig]]], console: Console) -> list[Skill] | None:
    """The skills agents name that are on disk (to apply with them), each problem printed;
    None when one is broken, or neither on disk nor applied."""
    root = skills_dir()
    skills: dict[str, Skill | None] = {}
    problems: list[ConfigProblem] = []
    elsewhere: dict[str, list[tuple[str, str]]] = {}  # name -> (agent file, field) naming it
    for path, configs in loaded:
        for config in configs:
            for index, ref in enumerate(config.spec.skills):
                where = (str(path), f"spec.skills[{index}]")
                if not (root / ref / SKILL_FILE).is_file():
                    elsewhere.setdefault(ref, []).append(where)
                elif ref not in skills:
                    checked = _check(root / ref, root)
                    skills[ref] = checked.skill
                    problems += checked.problems
    applied, reason = applied_names([ref.rsplit("/", 1)[-1] for ref in elsewhere])
    for ref, places in elsewhere.items():
        if ref.rsplit("/", 1)[-1] in applied:
            continue
        why = "it is not applied" if reason is None else f"the applied skills could not be checked ({reason})"
        message = (
            f"no skill {ref!r}: {why} and there is no {root / ref / SKILL_FILE}; apply it with "
            f"`openloop skills apply PATH/TO/{ref.rsplit('/', 1)[-1]}`, or set OPENLOOP_SKILLS_DIR "
            "to the folder holding it"
        )
        problems += [ConfigProblem(file, None, field_name, message) for file, field_name in places]
    print_problems(console, problems)
    for skill in skills.values():
        if skill is not None:
            print_problems(console, list(skill.warnings), warning=True)
    if problems:
        return None
    return [skill for skill in skills.values() if skill is not None]


def applied_names(names: list[str]) -> tuple[set[str], str | None]:
    """Which of `names` have an applied version; the reason when the store cannot be asked."""
    if not names:
        return set(), None
    url = Settings.from_env().database_url
    if not url:
        return set(), "no database configured: run `openloop up`, or set OPENLOOP_DATABASE_URL"

    async def ask() -> set[str]:
        async with await psycopg.AsyncConnection.connect(url, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            cursor = await conn.execute("SELECT DISTINCT name FROM skills WHERE name = ANY(%s)", (names,))
            return {row[0] for row in await cursor.fetchall()}

    try:
        return asyncio.run(ask()), None
    except psycopg.Error as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        return set(), f"database: {first}"
