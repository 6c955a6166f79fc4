"""Every model name a user writes in an agent file, and the shape of a check on one.

Config does not import LiteLLM (pydantic and the standard library only), so whoever loads
agents for running passes the check in, as it passes the tool catalog:
`activities.model_names.check_model_name`. The loader reports a finding at the field (and
so the line) where the name is written: an error refuses the file, a warning is printed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from config.agent import AgentConfig
from config.fields import ProblemPath

__all__ = ["ModelCheck", "ModelFinding", "model_names"]


@dataclass(frozen=True)
class ModelFinding:
    message: str
    error: bool  # True: the file is refused; False: a warning, printed but not failing


# A model name -> what is wrong with it, or None when nothing is.
ModelCheck = Callable[[str], ModelFinding | None]


def model_names(config: AgentConfig) -> list[tuple[ProblemPath, str]]:
    """(field path, model name) for each model the agent names: its model policy (default,
    routes, fallbacks) and its memory's embedding model."""
    policy = config.spec.model_policy
    spec: ProblemPath = ("spec", "model_policy")
    found: list[tuple[ProblemPath, str]] = [((*spec, "default"), policy.default)]
    found += [((*spec, "routes", i, "model"), route.model) for i, route in enumerate(policy.routes)]
    found += [((*spec, "fallbacks", i), model) for i, model in enumerate(policy.fallbacks)]
    found.append((("spec", "memory", "embedding"), config.spec.memory.embedding))
    return found
