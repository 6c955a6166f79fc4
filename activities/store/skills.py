"""Skills in Postgres: applied and versioned like agents, read by name and version.

`apply_skills` stores a batch in one transaction: a failure names the skill and stores none
of them. Each skill gets a new version only when its content's sha256 changed, under an
advisory lock per name so two applies at once number their versions in turn. Resources are
rows of exact bytes in `skill_files`, read one at a time (a skill may ship megabytes of
fonts the model never opens). A task records the versions it started with (`SkillRef`) and
reads exactly those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool

from config.skills import Skill
from workflows.types import SkillRef


class SkillApplyError(Exception):
    """A batch of skills that could not be stored; none of it was."""


@dataclass(frozen=True)
class StoredSkill:
    name: str
    version: int
    sha256: str
    ref: str
    description: str
    body: str
    allowed_tools: list[str]
    applied_by: str

    @property
    def pinned(self) -> SkillRef:
        return SkillRef(self.name, self.version, self.sha256, self.description, tuple(self.allowed_tools))


async def apply_skills(
    pool: AsyncConnectionPool, skills: list[Skill], applied_by: str = ""
) -> list[tuple[StoredSkill, bool]]:
    """Store every skill of the batch, or none: (stored, whether a new version was made)."""
    results = []
    current: Skill | None = None
    async with pool.connection() as conn:
        try:
            async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                for skill in skills:
                    current = skill
                    results.append(await _apply_one(cur, skill, applied_by))
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            which = f"skill {current.name!r} ({current.ref})" if current else "the skills"
            raise SkillApplyError(
                f"{which} could not be stored: {reason}; none of the {len(skills)} skill(s) were applied"
            ) from exc
    return results


async def apply_skill(
    pool: AsyncConnectionPool, skill: Skill, applied_by: str = ""
) -> tuple[StoredSkill, bool]:
    """Store `skill` as a new version unless its latest version has the same content."""
    (result,) = await apply_skills(pool, [skill], applied_by)
    return result


async def _apply_one(
    cur: psycopg.AsyncCursor[Any], skill: Skill, applied_by: str
) -> tuple[StoredSkill, bool]:
    await cur.execute("SELECT pg_advisory_xact_lock(hashtext('skill:' || %s))", (skill.name,))
    await cur.execute(_LATEST + " WHERE name = %s ORDER BY version DESC LIMIT 1", (skill.name,))
    latest = await cur.fetchone()
    if latest is not None and latest["sha256"] == skill.sha256:
        return _stored(latest), False
    version = (latest["version"] if latest else 0) + 1
    await cur.execute(
        "INSERT INTO skills (name, version, sha256, ref, description, body, allowed_tools, applied_by)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING *",
        (
            skill.name,
            version,
            skill.sha256,
            skill.ref,
            skill.description,
            skill.body,
            list(skill.allowed_tools),
            applied_by,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    if skill.resources:
        await cur.executemany(
            "INSERT INTO skill_files (name, version, path, content) VALUES (%s, %s, %s, %s)",
            [(skill.name, version, path, data) for path, data in sorted(skill.resources.items())],
        )
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


async def skill_files(pool: AsyncConnectionPool, name: str, version: int) -> dict[str, int]:
    """The files a skill version ships: path -> size in bytes."""
    async with pool.connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(
            "SELECT path, octet_length(content) FROM skill_files WHERE name = %s AND version = %s"
            " ORDER BY path",
            (name, version),
        )
        return {path: size for path, size in await cur.fetchall()}


async def skill_file(pool: AsyncConnectionPool, name: str, version: int, path: str) -> bytes | None:
    """One file of a skill version, byte-exact; None when it ships no such file."""
    async with pool.connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(
            "SELECT content FROM skill_files WHERE name = %s AND version = %s AND path = %s",
            (name, version, path),
        )
        row = await cur.fetchone()
    return bytes(row[0]) if row else None


async def list_skills(pool: AsyncConnectionPool) -> list[StoredSkill]:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT DISTINCT ON (name) * FROM skills ORDER BY name, version DESC")
        return [_stored(row) for row in await cur.fetchall()]


_LATEST = "SELECT * FROM skills"


def _stored(row: dict[str, Any]) -> StoredSkill:
    return StoredSkill(
        name=row["name"],
        version=row["version"],
        sha256=row["sha256"],
        ref=row["ref"],
        description=row["description"],
        body=row["body"],
        allowed_tools=list(row["allowed_tools"] or []),
        applied_by=row["applied_by"],
    )
