"""The tool catalog's pure side: what a tool is (`ToolSpec`) and the set a task runs with.

Every tool an agent can call — native, MCP, skill, delegation, coding — is a `ToolSpec`:
name, description, canonical JSON schema with its sha256, permission, reads or writes,
where it runs, and which of the agent's bindings limit its writes. Specs are plain data:
a task is started with the specs of its agent's tools and keeps them in its input, so its
tool list never changes under it; the workflow checks calls against them without I/O.
Native tools are declared (arguments model, metadata, handler) in `activities/tools/`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ToolRuns(StrEnum):
    """Where a tool's call runs."""

    # Fast calls to our own database: a local activity, no server round trip; a local one
    # that only reads runs inside the next model call when it needs no approval.
    LOCAL = "local"
    REMOTE = "remote"  # calls to outside services, which can be slow or rate limited
    WORKSPACE = "workspace"  # on the worker that holds the task's workspace
    CHILD = "child"  # a child workflow (a subagent)


class WriteBound(StrEnum):
    """The agent binding that limits where a writing tool may act."""

    SLACK_CHANNELS = "slack_channels"  # spec.surfaces.slack.channels
    GITHUB_REPOS = "github_repos"  # spec.surfaces.github.repos
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
    source: str = "native"  # native | mcp:SERVER | skill | ...
    sha256: str = ""  # of the canonical schema; filled in when empty
    always_gated: bool = False  # waits for a person whatever approvals.require_for says

    def __post_init__(self) -> None:
        if not self.sha256:
            object.__setattr__(self, "sha256", schema_sha256(self.parameters))

    @property
    def local(self) -> bool:
        return self.runs == ToolRuns.LOCAL

    @property
    def mcp_server(self) -> str | None:
        """The MCP server this tool comes from (`mcp:linear` -> linear), if any."""
        return self.source.removeprefix("mcp:") if self.source.startswith("mcp:") else None

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

    def narrow(self, allowed: Collection[str], keep_sources: Collection[str]) -> list[str]:
        """Keep only the tools `allowed` names (and those of `keep_sources`): never adds one.
        Returns the names taken away."""
        removed = [s.name for s in self.specs if s.name not in allowed and s.source not in keep_sources]
        self.specs = [spec for spec in self.specs if spec.name not in removed]
        self._by_name = {spec.name: spec for spec in self.specs}
        return removed
