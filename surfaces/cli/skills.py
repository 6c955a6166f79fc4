"""`openloop skills validate|apply|list|show`, and the skills an agent file names.

Skills live in folders under the skills folder (`config/skills/` by default,
`OPENLOOP_SKILLS_DIR` to change it). `agents validate|apply` check and apply the skills each
agent names, so a missing or broken skill fails the apply with its file, line and field.
Exit codes: 0 ok, 1 unknown skill, 2 no usable database, 4 invalid skill.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from activities.store.skills import StoredSkill, apply_skill, latest_skills, list_skills
from config.agent import AgentConfig
from config.problems import AgentConfigError
from config.settings import Settings
from config.skills import DEFAULT_DIR, Skill, find_skills, load_skills
from surfaces.cli.memory import EXIT_NOT_FOUND, fail, run_with_pool, who

EXIT_INVALID = 4

skills_app = typer.Typer(help="Skills: SKILL.md folders agents load on demand.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(skills_app, name="skills")


def skills_dir() -> Path:
    return Settings.from_env().skills_dir or DEFAULT_DIR


def load_named(refs: list[str], console: Console) -> list[Skill] | None:
    """The skills `refs` name, each problem printed; None when any is missing or invalid."""
    try:
        return load_skills(skills_dir(), list(dict.fromkeys(refs)))
    except AgentConfigError as exc:
        for problem in exc.problems:
            console.print(f"  {escape(str(problem))}", soft_wrap=True)
        return None


def agent_skills(configs: list[AgentConfig], console: Console) -> list[Skill] | None:
    refs = [ref for config in configs for ref in config.spec.skills]
    return load_named(refs, console) if refs else []


async def apply_all(
    pool: AsyncConnectionPool, skills: list[Skill], applied_by: str
) -> list[tuple[StoredSkill, bool]]:
    return [await apply_skill(pool, skill, applied_by) for skill in skills]


def _refs(names: list[str] | None) -> list[str]:
    return names or find_skills(skills_dir())


@skills_app.command()
def validate(
    names: Annotated[list[str] | None, typer.Argument(help="Skill folders; default: all")] = None,
) -> None:
    """Check skills (SKILL.md frontmatter, names, resources) without applying them."""
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    skills = load_named(_refs(names), console)
    if skills is None:
        raise typer.Exit(EXIT_INVALID)
    for skill in skills:
        console.print(f"[green]✓[/green] {escape(skill.ref)}: OK ({len(skill.resources)} file(s))")


@skills_app.command()
def apply(
    names: Annotated[list[str] | None, typer.Argument(help="Skill folders; default: all")] = None,
) -> None:
    """Validate, then store each skill as a new version when its content changed."""
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    skills = load_named(_refs(names), console)
    if skills is None:
        raise fail("nothing applied: fix the problems above first", EXIT_INVALID)
    applied_by = who()
    for stored, created in run_with_pool(lambda pool: apply_all(pool, skills, applied_by)):
        outcome = "[green]applied[/green]" if created else "[dim]unchanged[/dim]"
        console.print(f"{escape(stored.name)}  version {stored.version}  {outcome}")


@skills_app.command("list")
def list_command() -> None:
    """Every applied skill's latest version."""
    table = Table("skill", "version", "sha256", "description", box=None)
    for skill in run_with_pool(list_skills):
        table.add_row(skill.name, str(skill.version), skill.sha256[:12], skill.description)
    Console(emoji=False, highlight=False).print(table)


@skills_app.command()
def show(name: Annotated[str, typer.Argument(help="The skill's name")]) -> None:
    """A skill's latest version: its description, files and instructions."""
    found = run_with_pool(lambda pool: latest_skills(pool, [name]))
    if not found:
        raise fail(f"no skill named {name!r}: apply it with `openloop skills apply {name}`", EXIT_NOT_FOUND)
    skill = found[0]
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    console.print(f"{escape(skill.name)} v{skill.version} ({skill.sha256[:12]}) from {escape(skill.ref)}")
    console.print(escape(skill.description))
    console.print(f"files: {escape(', '.join(sorted(skill.resources)) or 'none')}\n")
    console.print(escape(skill.body))
