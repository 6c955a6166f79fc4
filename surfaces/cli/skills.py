"""`openloop skills validate|apply|list|show`.

Skills are folders holding a SKILL.md: `validate` and `apply` take their paths (or a folder
of them, or names under `OPENLOOP_SKILLS_DIR`, default `config/skills/`). `validate` prints
like the other validators: one line per skill, ✓ or ✗, each problem as `path:line: field:
message`, warnings marked. `apply` stores the whole batch in one transaction or none of it.
Finding and checking skills, and resolving the skills agents name, is in
`surfaces.cli.skill_sources`.
Exit codes: 0 ok, 1 an invalid or unknown skill, 2 no usable database.
"""

from __future__ import annotations

from typing import Annotated

import typer
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from activities.store.skills import (
    SkillApplyError,
    StoredSkill,
    apply_skills,
    latest_skills,
    list_skills,
    skill_files,
)
from config.skills import Skill
from surfaces.cli.agents_db import fail, require_database, with_database
from surfaces.cli.memory import EXIT_NOT_FOUND, run_with_pool, who
from surfaces.cli.skill_sources import agent_skills, check_folders, print_checked

EXIT_INVALID = 1

__all__ = ["agent_skills", "apply_all", "register"]

skills_app = typer.Typer(help="Skills: SKILL.md folders agents load on demand.", no_args_is_help=True)

SkillArgs = Annotated[
    list[str] | None,
    typer.Argument(
        help="Skill folders (paths, folders of them, or names under the skills folder); default: all"
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(skills_app, name="skills")


def _out() -> Console:
    return Console(emoji=False, highlight=False, soft_wrap=True)


async def apply_all(
    pool: AsyncConnectionPool, skills: list[Skill], applied_by: str
) -> list[tuple[StoredSkill, bool]]:
    """The batch in one transaction; a failure raises SkillApplyError naming the skill."""
    return await apply_skills(pool, skills, applied_by)


@skills_app.command()
def validate(names: SkillArgs = None) -> None:
    """Check skills (SKILL.md frontmatter, names, resources) without applying them."""
    if not print_checked(_out(), check_folders(names)):
        raise typer.Exit(EXIT_INVALID)


@skills_app.command()
def apply(names: SkillArgs = None) -> None:
    """Validate, then store each skill as a new version when its content changed: all or none."""
    console = _out()
    require_database()
    results = check_folders(names)
    if not print_checked(console, results):
        raise fail("nothing applied: fix the problems above first", EXIT_INVALID)
    skills = [result.skill for result in results if result.skill is not None]
    applied_by = who()
    try:
        stored = with_database(lambda pool: apply_all(pool, skills, applied_by), migrate=True)
    except SkillApplyError as exc:
        raise fail(str(exc), EXIT_INVALID) from None
    for skill, created in stored:
        outcome = "[green]applied[/green]" if created else "[dim]unchanged[/dim]"
        console.print(f"{escape(skill.name)}  version {skill.version}  {outcome}")


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

    async def work(pool: AsyncConnectionPool) -> tuple[StoredSkill, dict[str, int]] | None:
        found = await latest_skills(pool, [name])
        return (found[0], await skill_files(pool, name, found[0].version)) if found else None

    shown = run_with_pool(work)
    if shown is None:
        raise fail(f"no skill named {name!r}: apply it with `openloop skills apply {name}`", EXIT_NOT_FOUND)
    skill, files = shown
    console = _out()
    console.print(f"{escape(skill.name)} v{skill.version} ({skill.sha256[:12]}) from {escape(skill.ref)}")
    console.print(escape(skill.description))
    console.print(f"files: {escape(', '.join(files) or 'none')}\n")
    console.print(escape(skill.body))
