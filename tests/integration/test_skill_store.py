"""Real published skills against the real Postgres: binary resources stored byte-exact and
read back, the model shown a binary file's description instead of its bytes, a batch stored
all or nothing, and an agent naming a skill that is applied but not on disk."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool
from temporalio.testing import ActivityEnvironment
from typer.testing import CliRunner

from activities.store.agents import get_agent
from activities.store.db import MIGRATIONS_DIR, get_pool
from activities.store.skill_activities import load_skill
from activities.store.skills import SkillApplyError, apply_skills, latest_skills, skill_file, skill_files
from config.settings import Settings
from config.skills import Skill
from config.skills import load_skill as read_folder
from surfaces.cli.agents import agents_app
from surfaces.cli.skills import skills_app
from surfaces.tasks import pinned_skills
from workflows.skill_tools import SkillLoadInput
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput

SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds" / "agent-skills"


def call(key: str) -> ToolCallInput:
    memory = MemoryScopeRef("ws", "a", "agent", "a", "offline/hashing-256", 30)
    context = SurfaceContext("cli", "c", "cli:test")
    return ToolCallInput(f"task-{key}", 1, key, "skill.read", {}, key, context, memory, "cli:test")


def renamed(source: Path, root: Path) -> Path:
    """A copy of a real skill under a fresh name, so each test stores its own versions."""
    name = f"{source.name}-{uuid.uuid4().hex[:6]}"
    folder = root / name
    shutil.copytree(source, folder)
    skill_md = folder / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace(f"name: {source.name}\n", f"name: {name}\n", 1))
    return folder


@pytest.fixture
async def pool(db_settings: Settings) -> AsyncConnectionPool:
    return await get_pool(db_settings.require_database_url())


async def test_binary_resources_are_stored_byte_exact_and_described_to_the_model(
    pool: AsyncConnectionPool, tmp_path: Path
) -> None:
    folders = [
        renamed(SEEDS / name, tmp_path)
        for name in ("canvas-design", "theme-factory", "web-artifacts-builder")
    ]
    latin1 = "Café crème".encode("latin-1")  # not UTF-8 and no NUL: once stored with U+FFFD
    (folders[1] / "notes.txt").write_bytes(latin1)
    skills = [read_folder(folder) for folder in folders]
    stored = await apply_skills(pool, skills)
    assert all(created for _, created in stored)

    for skill, (row, _) in zip(skills, stored, strict=True):
        files = await skill_files(pool, row.name, row.version)
        assert files == {path: len(data) for path, data in sorted(skill.resources.items())}
        for path, data in skill.resources.items():
            assert await skill_file(pool, row.name, row.version, path) == data, path

    env = ActivityEnvironment()
    canvas, theme = stored[0][0], stored[1][0]
    font = await env.run(
        load_skill, SkillLoadInput(call("f"), canvas.pinned, "canvas-fonts/EricaOne-Regular.ttf")
    )
    assert font.ok and font.output.startswith(
        "canvas-fonts/EricaOne-Regular.ttf is a binary file (24.3 KB, font/ttf)"
    )
    text = await env.run(load_skill, SkillLoadInput(call("t"), theme.pinned, "themes/arctic-frost.md"))
    theme_text = (SEEDS / "theme-factory" / "themes" / "arctic-frost.md").read_text()
    assert text.ok and text.output.startswith(theme_text[:400])  # as text; long outputs are cut
    odd = await env.run(load_skill, SkillLoadInput(call("o"), theme.pinned, "notes.txt"))
    assert odd.ok and odd.output.startswith("notes.txt is not UTF-8 text (10 bytes, text/plain)")


async def test_a_batch_that_fails_names_the_skill_and_stores_none_of_it(
    pool: AsyncConnectionPool, tmp_path: Path
) -> None:
    good = read_folder(renamed(SEEDS / "theme-factory", tmp_path))
    broken = Skill(ref="team/broken", name=f"broken-{uuid.uuid4().hex[:6]}", description="a\x00b", body="x")
    with pytest.raises(SkillApplyError) as info:
        await apply_skills(pool, [good, broken])
    assert f"skill {broken.name!r} (team/broken) could not be stored" in str(info.value)
    assert "none of the 2 skill(s) were applied" in str(info.value)
    assert await latest_skills(pool, [good.name, broken.name]) == []
    [(stored, created)] = await apply_skills(pool, [good])
    assert created and stored.version == 1


async def test_the_migration_moves_stored_text_resources_into_files(pg_url: str) -> None:
    database = f"mig_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute(f"CREATE DATABASE {database}")
    url = make_conninfo(pg_url, dbname=database)
    migrations = sorted(MIGRATIONS_DIR.glob("*.sql"))
    upgrade = next(path for path in migrations if path.name.endswith("_skill_files.sql"))
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for path in migrations[: migrations.index(upgrade)]:
            await conn.execute(path.read_text())
        await conn.execute(
            "INSERT INTO skills (name, version, sha256, ref, description, body, resources)"
            """ VALUES ('triage', 1, 'x', 'triage', 'd', 'b', '{"steps.md": "1. read – then fix"}')"""
        )
        await conn.execute(upgrade.read_text())
        cursor = await conn.execute("SELECT path, content FROM skill_files WHERE name = 'triage'")
        assert await cursor.fetchall() == [("steps.md", "1. read – then fix".encode())]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute(f"DROP DATABASE {database}")


def test_an_agent_names_a_skill_that_is_applied_but_not_on_disk(
    pg_url: str, db_settings: Settings, tmp_path: Path
) -> None:
    folder = renamed(SEEDS / "canvas-design", tmp_path / "elsewhere")
    empty = tmp_path / "skills"
    empty.mkdir()
    separator = "&" if "?" in pg_url else "?"
    env = {
        "OPENLOOP_DATABASE_URL": f"{pg_url}{separator}application_name=openloop-skill-store-test",
        "OPENLOOP_SKILLS_DIR": str(empty),
        "COLUMNS": "400",
    }
    runner = CliRunner()
    applied = runner.invoke(skills_app, ["apply", str(folder)], env=env)
    assert applied.exit_code == 0, applied.output
    assert f"{folder.name}  version 1  applied" in applied.output

    agent_name = f"designer-{uuid.uuid4().hex[:6]}"
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "apiVersion: openloop.ai/v1alpha1\nkind: Agent\n"
        f"metadata: {{name: {agent_name}}}\nspec:\n  skills: [{folder.name}]\n"
    )
    validated = runner.invoke(agents_app, ["validate", "-f", str(agent)], env=env)
    assert validated.exit_code == 0, validated.output
    done = runner.invoke(agents_app, ["apply", "-f", str(agent)], env=env)
    assert done.exit_code == 0, done.output

    async def offered() -> list[str]:
        pool = await get_pool(pg_url)
        try:
            stored = await get_agent(pool, agent_name)
            assert stored is not None
            return [ref.name for ref in await pinned_skills(db_settings, stored)]
        finally:
            await pool.close()

    assert asyncio.run(offered()) == [folder.name]  # the skills its tasks start with

    agent.write_text(agent.read_text().replace(folder.name, "never-applied"))
    refused = runner.invoke(agents_app, ["validate", "-f", str(agent)], env=env)
    assert refused.exit_code == 1
    assert (
        f"{agent}: spec.skills[0]: no skill 'never-applied': it is not applied and there is no "
        f"{empty / 'never-applied' / 'SKILL.md'}; apply it with `openloop skills apply PATH/TO/never-applied`"
    ) in refused.output
