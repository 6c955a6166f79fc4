"""Versioned agent definitions in Postgres.

`apply` stores a new version only when the spec changed; tasks start with the latest
version's snapshot and keep it for their whole life, so a later `apply` never changes a
task that is already running.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from config.agent import AgentConfig


@dataclass(frozen=True)
class StoredAgent:
    config: AgentConfig
    version: int
    applied_at: datetime
    spec_sha256: str
    source: str = ""
    applied_by: str = ""

    @property
    def name(self) -> str:
        return self.config.metadata.name

    @property
    def workspace(self) -> str:
        return self.config.metadata.workspace


def spec_digest(config: AgentConfig) -> str:
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _row_to_agent(row: Mapping[str, Any]) -> StoredAgent:
    return StoredAgent(
        config=AgentConfig.model_validate(row["spec"]),
        version=int(row["version"]),
        applied_at=row["applied_at"],
        spec_sha256=str(row["spec_sha256"]),
        source=str(row["source"]),
        applied_by=str(row["applied_by"]),
    )


class BindingConflict(ValueError):
    """Two agents claim the same Slack channel or GitHub repo: events would reach either."""


def surface_claims(config: AgentConfig) -> set[str]:
    """What the agent answers for: `slack:C123`, `github:owner/repo` (repos case-folded)."""
    claims: set[str] = set()
    if config.spec.surfaces.slack is not None:
        claims |= {f"slack:{channel}" for channel in config.spec.surfaces.slack.channels}
    if config.spec.surfaces.github is not None:
        claims |= {f"github:{repo.lower()}" for repo in config.spec.surfaces.github.repos}
    if config.spec.surfaces.discord is not None:
        claims |= {f"discord:{channel.lower()}" for channel in config.spec.surfaces.discord.channels}
    if config.spec.surfaces.linear is not None:
        claims |= {f"linear:{team.lower()}" for team in config.spec.surfaces.linear.teams}
    zoom = config.spec.surfaces.zoom
    if zoom is not None:  # a host's meetings go to one agent; an account's, when no host is named
        hosts = [host.lower() if "@" in host else host for host in zoom.hosts]
        claims |= {f"zoom:{host}" for host in hosts} or {f"zoom:account {zoom.account}"}
    return claims


def binding_conflicts(config: AgentConfig, others: list[AgentConfig]) -> list[str]:
    """Each claim of `config` that another agent already holds, as a sentence with the fix."""
    mine = surface_claims(config)
    problems = []
    for other in others:
        if (other.workspace, other.name) == (config.workspace, config.name):
            continue
        for claim in sorted(mine & surface_claims(other)):
            kind, target = claim.split(":", 1)
            what = {
                "slack": "Slack channel",
                "github": "GitHub repo",
                "discord": "Discord channel",
                "linear": "Linear team",
                "zoom": "the Zoom meetings of",
            }.get(kind, kind)
            problems.append(
                f"agent {config.name!r} claims {what} {target}, which agent {other.name!r} "
                f"(workspace {other.workspace}) already answers for: remove it from one of them"
            )
    return problems


async def apply_agent(
    pool: AsyncConnectionPool, config: AgentConfig, source: str = "", applied_by: str = ""
) -> tuple[StoredAgent, bool]:
    """Store `config` as the next version; returns (stored, created). Unchanged -> not created.

    Raises BindingConflict when another agent answers for one of its channels or repos.
    """
    digest = spec_digest(config)
    async with pool.connection() as conn, conn.transaction():
        # Serialise applies of the same agent so two never take the same version number, and
        # all applies that bind surfaces, so two agents never both take a channel.
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))",
            (f"agent:{config.workspace}/{config.name}",),
        )
        if surface_claims(config):
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('agent-bindings'))")
            cursor = await conn.cursor(row_factory=dict_row).execute(
                "SELECT DISTINCT ON (workspace, name) * FROM agents ORDER BY workspace, name, version DESC"
            )
            others = [_row_to_agent(row).config for row in await cursor.fetchall()]
            problems = binding_conflicts(config, others)
            if problems:
                raise BindingConflict("; ".join(problems))
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT * FROM agents WHERE workspace = %s AND name = %s ORDER BY version DESC LIMIT 1",
            (config.workspace, config.name),
        )
        latest = await cursor.fetchone()
        if latest is not None and latest["spec_sha256"] == digest:
            return _row_to_agent(latest), False
        version = 1 if latest is None else int(latest["version"]) + 1
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "INSERT INTO agents (workspace, name, version, spec, spec_sha256, source, applied_by)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING *",
            (
                config.workspace,
                config.name,
                version,
                json.dumps(config.model_dump(mode="json")),
                digest,
                source,
                applied_by,
            ),
        )
        row = await cursor.fetchone()
        assert row is not None
        return _row_to_agent(row), True


async def get_agent(
    pool: AsyncConnectionPool, name: str, workspace: str | None = None, version: int | None = None
) -> StoredAgent | None:
    """The latest (or a given) version of an agent; `workspace=None` matches any workspace."""
    query = "SELECT * FROM agents WHERE name = %s"
    params: list[object] = [name]
    if workspace is not None:
        query += " AND workspace = %s"
        params.append(workspace)
    if version is not None:
        query += " AND version = %s"
        params.append(version)
    query += " ORDER BY version DESC LIMIT 1"
    async with pool.connection() as conn:
        cursor = conn.cursor(row_factory=dict_row)
        row = await (await cursor.execute(query, params)).fetchone()
    return _row_to_agent(row) if row else None


async def list_agents(pool: AsyncConnectionPool) -> list[StoredAgent]:
    """The latest version of every agent."""
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT DISTINCT ON (workspace, name) * FROM agents ORDER BY workspace, name, version DESC"
        )
        return [_row_to_agent(row) for row in await cursor.fetchall()]


async def list_versions(pool: AsyncConnectionPool, name: str) -> list[StoredAgent]:
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT * FROM agents WHERE name = %s ORDER BY workspace, version", (name,)
        )
        return [_row_to_agent(row) for row in await cursor.fetchall()]


# The surfaces look an agent up for every event: re-validating every spec each time costs
# more than the start it leads to. Versions only grow and rows are never updated in place,
# so (row count, newest apply) changes whenever the latest versions could have.
_latest: dict[int, tuple[tuple[object, ...], list[StoredAgent], float]] = {}
TRUST_CACHED_SECONDS = 1.0


async def latest_agents(pool: AsyncConnectionPool, trust_cached: float = 0.0) -> list[StoredAgent]:
    """`list_agents`, re-read only when an agent was applied or deleted since the last call.

    With `trust_cached`, a list checked less than that many seconds ago is returned unchecked.
    """
    cached = _latest.get(id(pool))
    if cached is not None and time.monotonic() - cached[2] < trust_cached:
        return cached[1]
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT count(*) AS n, max(applied_at) AS newest FROM agents"
        )
        row = await cursor.fetchone()
    fingerprint = (row["n"], row["newest"]) if row else ()
    agents = cached[1] if cached is not None and cached[0] == fingerprint else await list_agents(pool)
    _latest[id(pool)] = (fingerprint, agents, time.monotonic())
    return agents


async def _bound_agent(pool: AsyncConnectionPool, bound: Callable[[StoredAgent], bool]) -> StoredAgent | None:
    """The agent bound to a surface target; a miss re-checks at once, so a new agent counts."""
    for trust in (TRUST_CACHED_SECONDS, 0.0):
        for agent in await latest_agents(pool, trust):
            if bound(agent):
                return agent
    return None


def _on_channel(channel: str) -> Callable[[StoredAgent], bool]:
    def bound(agent: StoredAgent) -> bool:
        slack = agent.config.spec.surfaces.slack
        return slack is not None and channel in slack.channels

    return bound


def _on_repo(repo: str) -> Callable[[StoredAgent], bool]:
    def bound(agent: StoredAgent) -> bool:
        github = agent.config.spec.surfaces.github
        return github is not None and repo.lower() in (r.lower() for r in github.repos)

    return bound


async def agent_for_slack_channel(pool: AsyncConnectionPool, channel: str) -> StoredAgent | None:
    return await _bound_agent(pool, _on_channel(channel))


async def agent_for_github_repo(pool: AsyncConnectionPool, repo: str) -> StoredAgent | None:
    return await _bound_agent(pool, _on_repo(repo))


async def agent_for_discord_channel(
    pool: AsyncConnectionPool, channel_id: str, channel_name: str | None = None
) -> StoredAgent | None:
    """The agent bound to a Discord channel, by its id or (as agents may name it) its name."""

    def bound(agent: StoredAgent) -> bool:
        discord = agent.config.spec.surfaces.discord
        return discord is not None and discord.binds(channel_id, channel_name)

    return await _bound_agent(pool, bound)


async def agent_for_linear_team(
    pool: AsyncConnectionPool, team_key: str, team_id: str | None
) -> StoredAgent | None:
    """The agent bound to a Linear team, by its key (ENG) or its id."""

    def bound(agent: StoredAgent) -> bool:
        linear = agent.config.spec.surfaces.linear
        return linear is not None and linear.binds(team_key, team_id)

    return await _bound_agent(pool, bound)
