"""The fields of pyopenloop's agent files that live elsewhere here, or nowhere.

- `apiVersion: openloop.team/v1alpha1` (pyopenloop 0.1) is the format `openloop.ai/v1alpha1`
  names (0.0): read the same way.
- `metadata.id` was pyopenloop's identity of record (billing and spend scope). Here an
  agent is known by workspace and name, and everything it owns is kept under them: the
  id is left out with a warning.
- An MCP tool in `spec.tools` (`type: mcp`, `server`, `permissions`, `headers`,
  `credentials`) is an entry of `spec.mcp_servers`: the server is its URL (streamable HTTP)
  or command (stdio), its permissions are the allow list, `headers` are sent as written and
  `credentials: github` is `Authorization: Bearer ${GITHUB_TOKEN}` read from the worker's
  environment.
- The coding tools `coding_worker` (`pr:write`) and `workspace_task` (`code:write`,
  `investigate:read`) are our code tools: a workspace opened with `code.open_workspace`,
  edited and tested with `code.*`, and, for the writing permissions, a draft pull request
  with `github.create_pull_request`; gating one gates that pull request.

Plain data in and out, no I/O.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from config.seed_expansion import Expansion, Loc
from config.surface_kinds import NOT_YET_SERVED

SEED_API_VERSION = "openloop.team/v1alpha1"
# Surfaces pyopenloop names that this release does not serve: a warning, not a refusal.
UNSERVED_SURFACES = NOT_YET_SERVED
TASK_ALIASES = {"investigate": "investigate_ci"}  # pyopenloop's "investigate failing CI"

OPEN = "code.open_workspace"
PULL_REQUEST = "github.create_pull_request"
# Each coding permission: whether it writes (edits and proposes a pull request) or only reads.
CODE_FAMILIES: dict[str, dict[str, bool]] = {
    "coding_worker": {"pr:write": True},
    "workspace_task": {"code:write": True, "investigate:read": False},
}
CREDENTIALS = {"github": "Bearer ${GITHUB_TOKEN}"}  # pyopenloop's credential integrations
_MCP_KEYS = ("name", "type", "server", "permissions", "headers", "credentials")


def code_tools(writes: bool, tools: Mapping[str, str]) -> list[str]:
    """The tools here one coding permission stands for, in the order a task uses them."""
    code = [name for name in tools if name.startswith("code.") and name != OPEN]
    used = [name for name in code if writes or tools[name] == "code:read"]
    publish = [PULL_REQUEST] if writes and PULL_REQUEST in tools else []
    return [OPEN, *used, *publish] if OPEN in tools else [*used, *publish]


def code_gate(writes: bool) -> str:
    """The tool an approval of a coding permission gates: the pull request, or the workspace."""
    return PULL_REQUEST if writes else OPEN


def identity(data: dict[str, Any], result: Expansion) -> dict[str, Any]:
    """The document without `metadata.id`, and the warning that says why."""
    metadata = data.get("metadata")
    if not isinstance(metadata, dict) or "id" not in metadata:
        return data
    result.warn(
        ("metadata", "id"),
        "not used here: an agent is known by workspace and name "
        f"({metadata.get('workspace', 'default')}/{metadata.get('name')}), and its usage, budgets, "
        "memory and approvals are kept under them (renaming it starts a new agent); remove the id",
    )
    return {**data, "metadata": {k: v for k, v in metadata.items() if k != "id"}}


def mcp_servers(items: list[Any], first: int, result: Expansion) -> list[dict[str, Any]]:
    """The MCP tools of a seed-form `spec.tools` as `spec.mcp_servers` entries numbered from
    `first`, each field's origin recorded so a problem points at what the user wrote."""
    servers: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or item.get("type") != "mcp":
            continue
        at: Loc = ("spec", "tools", index)
        to: Loc = ("spec", "mcp_servers", first + len(servers))
        server = _server(item, at, result)
        if server is None:
            continue
        result.origins[to] = at
        for ours, theirs in (("url", "server"), ("command", "server"), ("allow", "permissions")):
            result.origins[(*to, ours)] = (*at, theirs)
        result.origins[(*to, "headers_from_env")] = (*at, "credentials")
        result.note(at, to, f"MCP server {item.get('name')}: moved to spec.mcp_servers")
        servers.append(server)
    return servers


def _server(item: dict[str, Any], at: Loc, result: Expansion) -> dict[str, Any] | None:
    for key in item:
        if key not in _MCP_KEYS:
            allowed = ", ".join(_MCP_KEYS)
            result.problems.append(
                ((*at, key), f"unknown key {key!r} for an MCP tool; allowed keys: {allowed}")
            )
    address = item.get("server")
    if not isinstance(address, str) or not address.strip():
        result.problems.append(
            ((*at, "server"), "an MCP tool needs `server`: its URL (http://host:8931/mcp) or command")
        )
        return None
    server: dict[str, Any] = {"name": item.get("name")}
    if address.startswith(("http://", "https://")):
        server |= {"transport": "streamable-http", "url": address}
    else:
        server |= {"transport": "stdio", "command": shlex.split(address)}
    if item.get("headers"):
        server["headers"] = item["headers"]
    credentials = item.get("credentials")
    if credentials in CREDENTIALS and server["transport"] == "stdio":
        server["env_from"] = ["GITHUB_TOKEN"]
    elif credentials in CREDENTIALS:
        server["headers_from_env"] = {"Authorization": CREDENTIALS[str(credentials)]}
    elif credentials is not None:
        result.warn(
            (*at, "credentials"),
            f"credentials {credentials!r} names no credential here (known: "
            f"{', '.join(CREDENTIALS)}): the server is reached without one; name the header and its "
            "environment variable in the server's headers_from_env",
        )
    server["allow"] = item.get("permissions") or []
    return server


def needs_repositories(spec: dict[str, Any], granted: list[Any], result: Expansion) -> None:
    """Code tools work on the agent's GitHub repositories: warn when it has none."""
    surfaces = spec.get("surfaces")
    github = surfaces.get("github") if isinstance(surfaces, dict) else None
    if isinstance(github, dict) and github.get("repos"):
        return
    for position, grant in enumerate(granted):
        if isinstance(grant, dict) and grant.get("name") == OPEN:
            result.warn(
                result.original(("spec", "tools", position)),
                "code tools work on the agent's GitHub repositories and this agent has none, so "
                "code.open_workspace has nothing to open: add a surface such as "
                "{type: github, repo: owner/name}",
            )
            return
