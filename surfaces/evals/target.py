"""What an eval run runs: an applied agent version, optionally on another model.

The agent is the one `openloop agents apply` stored (`activities.store.agents`), so an eval
tests exactly what a surface would start. `--model` replaces the policy's models (default,
routes and fallbacks) with one, so the run measures that model alone. A case with scripted
answers runs on `scripted/eval`, whose answers are the script. Every case's memory is its
own channel's, whatever scope the agent's memory has (`isolated`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from psycopg_pool import AsyncConnectionPool

from activities.model_names import SCRIPTED_EVAL
from activities.store.agents import StoredAgent, get_agent

__all__ = ["Target", "TargetError", "on_model", "resolve_target"]


class TargetError(LookupError):
    """No such agent or version: the message says what to apply."""


@dataclass(frozen=True)
class Target:
    agent: StoredAgent
    model: str | None = None

    @property
    def label(self) -> str:
        text = f"{self.agent.name} v{self.agent.version}"
        return f"{text} on {self.model}" if self.model else text


def on_model(agent: StoredAgent, model: str) -> StoredAgent:
    """`agent` with every model of its policy replaced by `model`."""
    data = agent.config.model_dump(mode="json")  # as the store keeps it
    policy = data["spec"].setdefault("model_policy", {})
    policy["default"] = model
    policy.pop("routes", None)
    policy.pop("fallbacks", None)
    return replace(agent, config=type(agent.config).model_validate(data))


def scripted(agent: StoredAgent) -> StoredAgent:
    return on_model(agent, SCRIPTED_EVAL)


def isolated(agent: StoredAgent) -> StoredAgent:
    """`agent` with its memory scoped to the task's channel: an eval case's channel is its
    own, so what a case seeds or saves never reaches the agent's (or workspace's) memory."""
    if agent.config.spec.memory.scope.value == "channel":
        return agent
    data = agent.config.model_dump(mode="json")
    data["spec"].setdefault("memory", {})["scope"] = "channel"
    return replace(agent, config=type(agent.config).model_validate(data))


async def resolve_target(
    pool: AsyncConnectionPool, name: str, version: int | None = None, model: str | None = None
) -> Target:
    agent = await get_agent(pool, name, version=version)
    if agent is None:
        latest = await get_agent(pool, name)
        if latest is None:
            raise TargetError(f"no agent {name!r} is applied; apply it first: openloop agents apply -f FILE")
        raise TargetError(
            f"agent {name!r} has no version {version} (the latest is v{latest.version}); "
            f"see it with: openloop agents show {name}"
        )
    return Target(on_model(agent, model) if model else agent, model)
