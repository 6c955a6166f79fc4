"""Skills in Postgres: applied and versioned like agents, read by name and version.

`apply_skill` adds a version only when the content's sha256 changed, under an advisory lock
per name so two applies at once number their versions in turn. A task records the versions
it started with (`SkillRef`) and reads exactly those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from config.skills import Skill
from workflows.types import SkillRef


@dataclass(frozen=True)
class StoredSkill:
    name: str
    version: int
    sha256: str
    ref: str
    description: str
    body: str
    resources: dict[str, str]
    allowed_tools: list[str]
    applied_by: str

    @property
    def pinned(self) -> SkillRef:
        return SkillRef(self.name, self.version, self.sha256, self.description, tuple(self.allowed_tools))


async def apply_skill(
    pool: AsyncConnectionPool, skill: Skill, applied_by: str = ""
) -> tuple[StoredSkill, bool]:
    """Store `skill` as a new version unless its latest version has the same content."""
    async with pool.connection() as conn, conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT pg_advisory_xact_lock(hashtext('skill:' || %s))", (skill.name,))
        await cur.execute(_LATEST + " WHERE name = %s ORDER BY version DESC LIMIT 1", (skill.name,))
        latest = await cur.fetchone()
        if latest is not None and latest["sha256"] == skill.sha256:
            return _stored(latest), False
        version = (latest["version"] if latest else 0) + 1
        await cur.execute(
            "INSERT INTO skills (name, version, sha256, ref, description, body, resources, allowed_tools,"
            " applied_by) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING *",
            (
                skill.name,
                version,
                skill.sha256,
                skill.ref,
                skill.description,
                skill.body,
                json.dumps(skill.resources),
                list(skill.allowed_tools),
                applied_by,
            ),
        )
        row = await cur.fetchone()
        assert row is not None
        return _stored(row), True


async def latest_skills(pool: AsyncConnectionPool, names: list[str]) -> list[StoredSkill]:
    """The latest version of each named skill that was applied, in the order asked."""
    if not names:
        return []
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "SELECT DISTINCT ON (name) * FROM skills WHERE name = ANY(%s) ORDER BY name, version DESC",
            (names,),
        )
        found = {row["name"]: _stored(row) for row in await cur.fetchall()}
    return [found[name] for name in names if name in found]


async def pinned_skill(pool: AsyncConnectionPool, ref: SkillRef) -> StoredSkill | None:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(_LATEST + " WHERE name = %s AND version = %s", (ref.name, ref.version))
        row = await cur.fetchone()
    return _stored(row) if row else None


async def list_skills(pool: AsyncConnectionPool) -> list[StoredSkill]:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT DISTINCT ON (name) * FROM skills ORDER BY name, version DESC")
        return [_stored(row) for row in await cur.fetchall()]


_LATEST = "SELECT * FROM skills"


def _stored(row: dict[str, Any]) -> StoredSkill:
    resources = row["resources"]
    return StoredSkill(
        name=row["name"],
        version=row["version"],
        sha256=row["sha256"],
        ref=row["ref"],
        description=row["description"],
        body=row["body"],
        resources=resources if isinstance(resources, dict) else json.loads(resources),
        allowed_tools=list(row["allowed_tools"] or []),
        applied_by=row["applied_by"],
    )
