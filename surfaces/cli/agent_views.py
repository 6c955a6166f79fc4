"""How `openloop agents list` and `show` print a stored agent: pure text builders.

`show_yaml` writes a document that can be saved and applied again as it is (its header is
YAML comments); `show_json` the same facts for scripts. Nothing here touches the database.
"""

from __future__ import annotations

import json
import os
from typing import Any

import yaml

from activities.store.agents import StoredAgent
from config.agent import AgentConfig

# The key each embedding provider needs, to say which one is missing.
_PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY",
    "azure": "AZURE_API_KEY",
    "cohere": "COHERE_API_KEY",
    "voyage": "VOYAGE_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "gemini": "GEMINI_API_KEY",
}


def embedding_description(model: str) -> str:
    """Which embedding model memory uses, and whether it needs a key."""
    if model.startswith("offline/"):
        return f"{model} (offline, no key needed)"
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    key = _PROVIDER_KEYS.get(provider)
    if key is None:
        return f"{model} (provider {provider}; needs that provider's API key)"
    state = "set" if os.environ.get(key) else "not set"
    return f"{model} (provider {provider}; needs {key}, which is {state})"


def surfaces_summary(config: AgentConfig) -> str:
    surfaces = config.spec.surfaces
    parts = []
    if surfaces.slack is not None:
        parts.append("slack: " + ", ".join(surfaces.slack.channels))
    if surfaces.github is not None:
        parts.append("github: " + ", ".join(surfaces.github.repos))
    if surfaces.cli:
        parts.append("cli")
    return "; ".join(parts) or "none"


class _BlockStyleDumper(yaml.SafeDumper):
    """Multi-line text (instructions) as `|` blocks, as a person would write it."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BlockStyleDumper.add_representer(str, _represent_str)


def show_json(agent: StoredAgent) -> str:
    document: dict[str, Any] = {
        "name": agent.name,
        "workspace": agent.workspace,
        "version": agent.version,
        "applied_at": agent.applied_at.isoformat(),
        "applied_by": agent.applied_by,
        "source": agent.source,
        "spec_sha256": agent.spec_sha256,
        "memory_embedding": embedding_description(agent.config.spec.memory.embedding),
        "config": agent.config.model_dump(mode="json"),
    }
    return json.dumps(document, indent=2)


def show_yaml(agent: StoredAgent) -> str:
    # The header is YAML comments, so the output can be saved and applied again as it is.
    memory = agent.config.spec.memory
    header = [
        f"# {agent.name} in workspace {agent.workspace}: version {agent.version}, applied "
        f"{agent.applied_at.isoformat(timespec='seconds')}"
        + (f" by {agent.applied_by}" if agent.applied_by else "")
        + (f" from {agent.source}" if agent.source else ""),
        f"# memory embedding: {embedding_description(memory.embedding)}",
        f"# memory: scope {memory.scope.value}, kept {memory.retention_days} days",
    ]
    body = yaml.dump(
        agent.config.model_dump(mode="json"),
        Dumper=_BlockStyleDumper,
        sort_keys=False,
        allow_unicode=True,
    )
    return "\n".join(header) + "\n" + body
