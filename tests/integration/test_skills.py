"""Skills against the real Postgres and CLI: applied and versioned like agents, pinned by a
task when it starts, read back only at the version it pinned."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from psycopg_pool import AsyncConnectionPool
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from typer.testing import CliRunner

from activities.store.db import get_pool
from activities.store.skill_activities import load_skill
from activities.store.skills import apply_skill, latest_skills
from config.settings import Settings
from config.skills import load_skill as read_folder
from surfaces.cli.main import app
from surfaces.tasks import pinned_skills
from tests.reliability.harness import agent_config, stored
from workflows.skill_tools import SkillLoadInput
from workflows.types import MemoryScopeRef, SkillRef, SurfaceContext, ToolCallInput

SKILL = """---
name: {name}
description: "Says how to do {name}"
---
Step one of {name}.
"""


def skill_folder(root: Path, name: str, body: str = "") -> Path:
    where = root / name
    where.mkdir(parents=True, exist_ok=True)
    (where / "SKILL.md").write_text(SKILL.format(name=name) + body)
    (where / "notes.md").write_text(f"notes of {name}")
    return where


def call(key: str) -> ToolCallInput:
    memory = MemoryScopeRef("ws", "a", "agent", "a", "offline/hashing-256", 30)
    context = SurfaceContext("cli", "c", "cli:test")
    return ToolCallInput(f"task-{key}", 1, key, "skill.load", {}, key, context, memory, "cli:test")


@pytest.fixture
async def pool(db_settings: Settings) -> AsyncConnectionPool:
    return await get_pool(db_settings.require_database_url())


async def test_a_task_reads_the_version_it_pinned_and_never_a_changed_one(
    pool: AsyncConnectionPool, tmp_path: Path
) -> None:
    name = f"sk-{uuid.uuid4().hex[:8]}"
    first, created = await apply_skill(pool, read_folder(skill_folder(tmp_path, name)))
    again, created_again = await apply_skill(pool, read_folder(skill_folder(tmp_path, name)))
    assert created and not created_again and again.version == first.version == 1
    second, _ = await apply_skill(pool, read_folder(skill_folder(tmp_path, name, "Step two.\n")))
    assert second.version == 2 and (await latest_skills(pool, [name]))[0].version == 2

    env = ActivityEnvironment()
    body = await env.run(load_skill, SkillLoadInput(call("k1"), first.pinned))
    assert body.ok and "Step one" in body.output and "Step two" not in body.output  # v1, as pinned
    notes = await env.run(load_skill, SkillLoadInput(call("k2"), second.pinned, "notes.md"))
    assert notes.output == f"notes of {name}"
    missing = await env.run(load_skill, SkillLoadInput(call("k3"), second.pinned, "../../etc/passwd"))
    assert not missing.ok and "has no file" in missing.output
    forged = SkillRef(name, 1, "0" * 64, "x")
    with pytest.raises(ApplicationError, match="gone or changed"):
        await env.run(load_skill, SkillLoadInput(call("k4"), forged))


async def test_a_task_pins_the_latest_applied_versions_of_its_agents_skills(
    pool: AsyncConnectionPool, db_settings: Settings, tmp_path: Path
) -> None:
    name = f"sk-{uuid.uuid4().hex[:8]}"
    applied, _ = await apply_skill(pool, read_folder(skill_folder(tmp_path, name)))
    agent = await stored(db_settings.require_database_url(), agent_config(skills=[f"team/{name}"]))
    assert await pinned_skills(db_settings, agent) == [applied.pinned]


def test_agents_apply_applies_the_skills_an_agent_names(pg_url: str, tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    name = f"sk-{uuid.uuid4().hex[:8]}"
    skill_folder(skills, name)
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "apiVersion: openloop.ai/v1alpha1\nkind: Agent\n"
        f"metadata: {{name: skilled-{uuid.uuid4().hex[:6]}}}\nspec:\n  skills: [{name}]\n"
    )
    separator = "&" if "?" in pg_url else "?"
    env = {
        "OPENLOOP_DATABASE_URL": f"{pg_url}{separator}application_name=openloop-skills-test",
        "OPENLOOP_SKILLS_DIR": str(skills),
        "COLUMNS": "200",
    }
    runner = CliRunner()
    applied = runner.invoke(app, ["agents", "apply", "-f", str(agent)], env=env)
    assert applied.exit_code == 0, applied.output
    listed = runner.invoke(app, ["skills", "list"], env=env)
    assert name in listed.output and "Says how to do" in listed.output
    shown = runner.invoke(app, ["skills", "show", name], env=env)
    assert f"Step one of {name}" in shown.output and "notes.md" in shown.output
    agent.write_text(agent.read_text().replace(name, "missing-skill"))
    refused = runner.invoke(app, ["agents", "apply", "-f", str(agent)], env=env)
    assert refused.exit_code != 0 and "no skill 'missing-skill'" in refused.output
