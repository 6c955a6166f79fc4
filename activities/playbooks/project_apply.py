"""A project's own agents and skills (a Loopy registry's, `config.playbooks.project_skills`),
applied with its playbooks: each skill and agent as a new version when it changed.

An agent of the same name applied some other way (an agent file, another tool) is never
replaced: the apply stops before anything is stored and says which names to change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool

from activities.store.agents import apply_agent, get_agent
from activities.store.skills import apply_skill
from config.agent import AgentConfig
from config.playbooks.project_skills import PROJECT_AGENT_MARK
from config.skills import Skill

__all__ = ["ProjectApplied", "apply_project", "foreign_agents"]


@dataclass
class ProjectApplied:
    agents: list[str] = field(default_factory=list)  # "name vN" (applied) or "name vN unchanged"
    skills: list[str] = field(default_factory=list)


async def foreign_agents(pool: AsyncConnectionPool, configs: list[AgentConfig]) -> list[str]:
    """The names among `configs` already taken by an agent that no registry made."""
    taken = []
    for config in configs:
        stored = await get_agent(pool, config.name, config.workspace)
        if stored is not None and not stored.config.metadata.description.startswith(PROJECT_AGENT_MARK):
            taken.append(config.name)
    return taken


async def apply_project(
    pool: AsyncConnectionPool, configs: list[AgentConfig], skills: list[Skill], applied_by: str
) -> ProjectApplied:
    """Store the skills first (an agent's task loads them by name), then the agents."""
    done = ProjectApplied()
    for skill in skills:
        stored, created = await apply_skill(pool, skill, applied_by)
        done.skills.append(f"{stored.name} v{stored.version}" + ("" if created else " unchanged"))
    for config in configs:
        agent, created = await apply_agent(pool, config, applied_by=applied_by)
        done.agents.append(f"{agent.name} v{agent.version}" + ("" if created else " unchanged"))
    return done
