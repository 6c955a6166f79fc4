"""Which models can be asked now: a provider whose key is missing from the worker's
environment, or that rejected its credentials, is skipped for a cool-down instead of being
asked again on every step of every task.

The table is per worker process: each worker learns on its own, and a restart (the usual
way a new key reaches a worker) starts afresh. Entries are keyed by the model, the API base
and a fingerprint of the key variable's value, so a worker given another key or another
server asks again at once. The offline stand-in is never skipped.

Also the start-up report: which models named by the agents in the database have no key.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Iterable

from psycopg_pool import AsyncConnectionPool
from temporalio.exceptions import ApplicationError

from activities.provider_errors import key_variable
from activities.providers import API_BASE_ENV, quiet_litellm
from workflows.errors import ErrorType

__all__ = [
    "COOL_DOWN_SECONDS",
    "forget",
    "missing_keys",
    "models_without_keys",
    "observe",
    "unavailable",
]

log = logging.getLogger(__name__)

# Long enough that a dead provider costs one failed request per five minutes, not one per
# step; short enough that a provider back from an outage of its auth service is used again.
COOL_DOWN_SECONDS = 300.0
_CREDENTIAL_WORDS = ("KEY", "SECRET", "TOKEN")

_now = time.monotonic  # the cool-down's clock (tests move it)
# entry key -> (monotonic time the cool-down ends, the error that started it)
_dead: dict[str, tuple[float, ApplicationError]] = {}


def missing_keys(model: str) -> list[str]:
    """The credential variables LiteLLM needs for `model` that the environment lacks.

    Only keys count: a base URL LiteLLM lists as missing (Ollama's) has a default or comes
    from OPENLOOP_MODEL_API_BASE."""
    if model.startswith(("offline/", "scripted/")):  # no provider: nothing to hold a key for
        return []
    import litellm

    quiet_litellm()
    try:
        found = litellm.validate_environment(model)
    except Exception:  # noqa: BLE001 - an unknown provider: let the call say what is wrong
        return []
    if found.get("keys_in_environment"):
        return []
    missing = [str(name) for name in found.get("missing_keys") or []]
    return [name for name in missing if any(word in name for word in _CREDENTIAL_WORDS)]


def unavailable(model: str) -> ApplicationError | None:
    """Why `model` is skipped now (its key is missing, or it is cooling down), else None."""
    if model.startswith(("offline/", "scripted/")):
        return None
    key = _entry(model)
    dead = _dead.get(key)
    if dead is not None:
        until, error = dead
        if _now() < until:
            return error
        del _dead[key]
    missing = missing_keys(model)
    if not missing:
        return None
    error = ApplicationError(
        f"{model}: no API key: set {' or '.join(missing)} in the worker's environment, or name "
        "another model in spec.model_policy",
        type=ErrorType.MODEL_AUTH_ERROR,
        non_retryable=True,
    )
    _cool_down(key, model, error)
    return error


def observe(model: str, error: ApplicationError) -> None:
    """Note a failed call: a provider that rejected its credentials cools down."""
    if error.type == ErrorType.MODEL_AUTH_ERROR and not model.startswith("offline/"):
        _cool_down(_entry(model), model, error)


def forget() -> None:
    """Ask every provider again (tests; a worker that was given new keys)."""
    _dead.clear()


def models_without_keys(models: Iterable[str]) -> dict[str, list[str]]:
    """Each of `models` (in order, once) whose key is missing, with the variables to set."""
    return {model: missing for model in dict.fromkeys(models) if (missing := missing_keys(model))}


async def report_missing_keys(pool: AsyncConnectionPool) -> list[str]:
    """Log, once at start-up, each model the applied agents name (policy, routes,
    fallbacks, memory embeddings) that has no key here; returns the lines logged."""
    from activities.store.agents import list_agents

    users: dict[str, list[str]] = {}
    for stored in await list_agents(pool):
        spec = stored.config.spec
        policy = spec.model_policy
        named = [policy.default, *(route.model for route in policy.routes), *policy.fallbacks]
        for model in [*named, spec.memory.embedding]:
            users.setdefault(model, []).append(stored.config.name)
    lines = [
        f"model {model} (agent {', '.join(dict.fromkeys(users[model]))}) has no key: set "
        f"{' or '.join(missing)} in the worker's environment (until then it is skipped)"
        for model, missing in models_without_keys(users).items()
    ]
    for line in lines:
        log.warning("%s", line)
    return lines


def _cool_down(key: str, model: str, error: ApplicationError) -> None:
    # Logged once per cool-down, not once per skipped step.
    log.warning("%s; skipping %s for %.0f s", error.message, model, COOL_DOWN_SECONDS)
    _dead[key] = (_now() + COOL_DOWN_SECONDS, error)


def _entry(model: str) -> str:
    """The model, where it is sent and which key it is sent with (hashed: never the key)."""
    secret = os.environ.get(key_variable(model), "")
    fingerprint = hashlib.sha256(secret.encode()).hexdigest()[:12]
    return f"{model}|{os.environ.get(API_BASE_ENV, '')}|{fingerprint}"
