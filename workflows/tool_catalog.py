"""The tool catalog's pure side: what a tool is (`ToolSpec`) and the set a task runs with.

Every tool an agent can call — native, MCP, skill, delegation, coding — is a `ToolSpec`:
name, description, canonical JSON schema with its sha256, permission, reads or writes,
who runs it, and which of the agent's bindings limit its writes. Specs are plain data:
a task is started with the specs of its agent's tools and keeps them in its input, so its
tool list never changes under it; the workflow checks calls against them without I/O.
Tools are declared once each (arguments model, metadata, handler): native ones in
`activities/tools/`, the ones the workflow runs itself in `workflows/tools/`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ToolRuns(StrEnum):
    """Who runs a tool's call, and where: what the tool dispatch routes on
    (`workflows.tool_dispatch`, the one place that reads it)."""

    # Native tools, in the tool activity. Fast calls to our own database: a local activity,
    # no server round trip; a local one that only reads runs inside the next model call
    # when it needs no approval.
    LOCAL = "local"
    REMOTE = "remote"  # calls to outside services, which can be slow or rate limited
    WORKSPACE = "workspace"  # on the worker that holds the task's workspace
    MCP = "mcp"  # an MCP server's tool, through the gateway activity
    WORKFLOW = "workflow"  # the workflow itself: the handler declared with the tool

    @classmethod
    def _missing_(cls, value: object) -> ToolRuns | None:
        # Release 0.1.0 recorded the tools that start a child workflow as `child`; the
        # workflow runs them itself (histories and inputs of running tasks still say so).
        return cls.WORKFLOW if value == "child" else None


# Release 0.1.0 named who runs a tool in `source` (specs in histories, running tasks'
# inputs and stored MCP listings); read as `runs` says it today.
_WORKFLOW_SOURCES_0_1 = frozenset({"delegate", "teammate", "skill", "workspace", "pull_request"})
_MCP_SOURCE = "mcp:"
# The permission scopes that only let a tool look (`issues:read`, `channels:history`).
READ_SCOPES = ("read", "history")


class WriteBound(StrEnum):
    """The agent binding that limits where a writing tool may act."""

    SLACK_CHANNELS = "slack_channels"  # spec.surfaces.slack.channels
    GITHUB_REPOS = "github_repos"  # spec.surfaces.github.repos
    DISCORD_CHANNELS = "discord_channels"  # spec.surfaces.discord.channels
    LINEAR_TEAMS = "linear_teams"  # spec.surfaces.linear.teams (keys or ids)
    LOOP_FILES = "loop_files"  # only the tool grant's limit_to: no surface names loop files


def canonical_schema(node: Any, names: bool = False) -> Any:
    """A JSON schema without titles, and with `x: T | None = None` made "may be omitted"
    (the model should not send null). `names`: the keys here are property names (one may be
    called "title"), not keywords."""
    if isinstance(node, list):
        return [canonical_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {key: canonical_schema(value) for key, value in node.items()}
    out = {key: canonical_schema(value, key == "properties") for key, value in node.items() if key != "title"}
    variants = out.get("anyOf")
    if isinstance(variants, list) and {"type": "null"} in variants and out.get("default", 0) is None:
        rest = [variant for variant in variants if variant != {"type": "null"}]
        del out["anyOf"], out["default"]
        out.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
    return out


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_sha256(parameters: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(parameters).encode()).hexdigest()


@dataclass(frozen=True)
class ToolSpec:
    name: str  # `family.tool`, e.g. github.create_issue (MCP: server.tool)
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments
    permission: str  # the scope an agent's spec.tools[].permissions must grant
    writes: bool  # side-effecting: runs with an idempotency key
    runs: ToolRuns = ToolRuns.REMOTE
    # The argument naming where a write lands, and the binding that must contain it.
    bound_argument: str | None = None
    bound_by: WriteBound | None = None
    source: str = "native"  # where it is declared: native | mcp:SERVER | workflow
    sha256: str = ""  # of the canonical schema; filled in when empty
    always_gated: bool = False  # waits for a person whatever approvals.require_for says

    def __post_init__(self) -> None:
        if not self.sha256:
            object.__setattr__(self, "sha256", schema_sha256(self.parameters))
        if self.source in _WORKFLOW_SOURCES_0_1:
            object.__setattr__(self, "runs", ToolRuns.WORKFLOW)
        elif self.source.startswith(_MCP_SOURCE) and self.runs == ToolRuns.REMOTE:
            object.__setattr__(self, "runs", ToolRuns.MCP)

    @property
    def native(self) -> bool:
        """Declared in `activities/tools/` and run by the tool activity."""
        return self.runs in (ToolRuns.LOCAL, ToolRuns.REMOTE, ToolRuns.WORKSPACE)

    @property
    def reads_only(self) -> bool:
        """Changes nothing, not even the task's own workspace: it writes nothing and needs
        only a permission to look. What a subagent profile's `reading` entry offers."""
        return not self.writes and self.permission.rpartition(":")[2] in READ_SCOPES

    @property
    def mcp_server(self) -> str | None:
        """The MCP server this tool comes from (`mcp:linear` -> linear), if any."""
        return self.source.removeprefix(_MCP_SOURCE) if self.source.startswith(_MCP_SOURCE) else None

    @property
    def model_name(self) -> str:
        return model_tool_name(self.name)

    def openai_schema(self) -> dict[str, Any]:
        """The tool as a model sees it (OpenAI function-calling format, used by LiteLLM)."""
        return {
            "type": "function",
            "function": {
                "name": self.model_name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def model_tool_name(name: str) -> str:
    """`github.create_issue` -> `github__create_issue`: providers allow only [a-zA-Z0-9_-]."""
    return name.replace(".", "__")


def catalog_tool_name(model_name: str) -> str:
    return model_name.replace("__", ".")


class ToolSet:
    """The specs one task runs with, by name."""

    def __init__(self, specs: list[ToolSpec]) -> None:
        self.specs = list(specs)
        self._by_name = {spec.name: spec for spec in specs}

    def get(self, name: str) -> ToolSpec | None:
        return self._by_name.get(name)

    def add(self, specs: list[ToolSpec]) -> None:
        """Tools listed at the task's start (MCP); a name already here keeps its first spec."""
        for spec in specs:
            if spec.name not in self._by_name:
                self.specs.append(spec)
                self._by_name[spec.name] = spec

    @property
    def names(self) -> list[str]:
        return [spec.name for spec in self.specs]

    def narrow(self, allowed: Collection[str], keep: Collection[str]) -> list[str]:
        """Keep only the tools `allowed` names (and those `keep` names): never adds one.
        Returns the names taken away."""
        removed = [s.name for s in self.specs if s.name not in allowed and s.name not in keep]
        self.specs = [spec for spec in self.specs if spec.name not in removed]
        self._by_name = {spec.name: spec for spec in self.specs}
        return removed
