"""Pydantic models of an agent definition: `apiVersion: openloop.ai/v1alpha1`, `kind: Agent`.

Only pydantic lives here: the models are imported by workflow code (through the sandbox
pass-through) and by every surface, so they must stay free of I/O.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from config.coding import CodingSpec
from config.fields import Duration, ProblemPath, Strict, parse_duration, rule_error
from config.mcp import McpServer, patterns_overlap
from config.model_policy import ModelPolicy
from config.subagents import SubagentsSpec, subagent_problems
from config.surfaces import Surfaces
from config.tool_grants import ToolGrant

API_VERSION = "openloop.ai/v1alpha1"

# Safe defaults that are always on, even when `spec.limits` is omitted.
DEFAULT_MAX_ITERATIONS = 12
DEFAULT_TOKEN_LIMIT = 200_000
DEFAULT_WALL_CLOCK = "30m"
DEFAULT_APPROVAL_TTL = "72h"
# The longest a task may wait for one approval (or for a budget extension, which waits as
# long): the patch ledger's dates count on it (`workflows.patch_ledger.TASK_LIFETIME`).
MAX_APPROVAL_TTL = "30d"
DEFAULT_PER_TASK_USD = 1.0

_SKILL_REF = re.compile(r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class Metadata(Strict):
    name: str = Field(description="Agent name: lowercase letters, digits and dashes")
    workspace: str = "default"
    description: str = ""

    @field_validator("name", "workspace")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"{value!r} must be 1-63 lowercase letters, digits or dashes, "
                "starting and ending with a letter or digit"
            )
        return value


class MemoryScope(StrEnum):
    CHANNEL = "channel"
    AGENT = "agent"
    WORKSPACE = "workspace"


OFFLINE_EMBEDDING = "offline/hashing-256"


class MemorySpec(Strict):
    scope: MemoryScope = MemoryScope.CHANNEL
    backend: Literal["postgres"] = "postgres"
    retention_days: int = Field(default=90, ge=1)
    embedding: str = Field(
        default=OFFLINE_EMBEDDING,
        description="A LiteLLM embedding model, or the offline default that needs no key",
    )
    recall_k: int = Field(default=5, ge=0, le=50)

    @field_validator("embedding")
    @classmethod
    def _known_offline_embedding(cls, embedding: str) -> str:
        # Any other `offline/...` name would be handed to LiteLLM and fail at run time.
        if embedding.startswith("offline/") and embedding != OFFLINE_EMBEDDING:
            raise ValueError(
                f"{embedding!r} is not an offline embedding; the offline one is "
                f"{OFFLINE_EMBEDDING}, any other must be a LiteLLM embedding model"
            )
        return embedding


class ApprovalsSpec(Strict):
    require_for: list[str] = []
    approvers: list[str] = []
    ttl: Duration = DEFAULT_APPROVAL_TTL
    on_denied: Literal["continue", "stop"] = "continue"

    @field_validator("ttl")
    @classmethod
    def _at_most_the_longest_wait(cls, ttl: str) -> str:
        if parse_duration(ttl) > parse_duration(MAX_APPROVAL_TTL):
            raise ValueError(
                f"{ttl!r} is longer than {MAX_APPROVAL_TTL}, the longest a task may wait for an "
                f"approval; set approvals.ttl to {MAX_APPROVAL_TTL} or less"
            )
        return ttl

    @property
    def ttl_seconds(self) -> float:
        return parse_duration(self.ttl)


class BudgetSpec(Strict):
    monthly_usd: float | None = Field(default=None, ge=0)
    per_task_usd: float = Field(default=DEFAULT_PER_TASK_USD, ge=0)
    per_channel_monthly_usd: float | None = Field(default=None, ge=0)
    on_exceeded: Literal["block", "warn"] = "block"


class LimitsSpec(Strict):
    max_iterations: int = Field(default=DEFAULT_MAX_ITERATIONS, ge=1, le=1000)
    token_limit: int = Field(default=DEFAULT_TOKEN_LIMIT, ge=1)
    wall_clock: Duration = DEFAULT_WALL_CLOCK
    no_progress_repeats: int = Field(default=3, ge=2)
    # Tasks over these wait in line (the thread says so); none is dropped.
    max_concurrent_tasks: int | None = Field(default=None, ge=1)
    tasks_per_minute: int | None = Field(default=None, ge=1)

    @property
    def wall_clock_seconds(self) -> float:
        return parse_duration(self.wall_clock)


class AgentSpecBody(Strict):
    instructions: str = "You are a helpful teammate. Be brief and concrete."
    surfaces: Surfaces = Surfaces()
    memory: MemorySpec = MemorySpec()
    model_policy: ModelPolicy = ModelPolicy()
    tools: list[ToolGrant] = []
    skills: list[str] = Field(default=[], description="Skill folders under the skills folder, e.g. triage")
    team: list[str] = Field(
        default=[], description="Other agents this one may consult with agent.ask_teammate"
    )
    subagents: SubagentsSpec = SubagentsSpec()
    mcp_servers: list[McpServer] = []
    approvals: ApprovalsSpec = ApprovalsSpec()
    budget: BudgetSpec = BudgetSpec()
    limits: LimitsSpec = LimitsSpec()
    coding: CodingSpec = CodingSpec()

    @model_validator(mode="after")
    def _cross_field_rules(self) -> AgentSpecBody:
        # Every problem is reported at its own field (tools[3].name, approvals.require_for[1]),
        # not at `spec`, so the loader can give the line to fix.
        problems: list[tuple[ProblemPath, str]] = []
        names = [tool.name for tool in self.tools]
        for index, name in enumerate(names):
            if name in names[:index]:
                problems.append(
                    (
                        ("tools", index, "name"),
                        f"{name!r} is already listed as tools[{names.index(name)}]; list each tool once",
                    )
                )
        for index, ref in enumerate(self.skills):
            if not _SKILL_REF.match(ref) or ".." in ref.split("/"):
                problems.append(
                    (
                        ("skills", index),
                        f"{ref!r} is not a skill folder path such as triage or rubrics/fix-quality",
                    )
                )
        for index, teammate in enumerate(self.team):
            if not _NAME.match(teammate):
                problems.append((("team", index), f"{teammate!r} is not an agent name"))
        problems += subagent_problems(self.subagents, names)
        servers = [server.name for server in self.mcp_servers]
        for index, name in enumerate(servers):
            if name in servers[:index]:
                problems.append((("mcp_servers", index, "name"), f"{name!r} is already an MCP server here"))
        for index, gated in enumerate(self.approvals.require_for):
            if gated not in names and not self._gates_an_mcp_tool(gated):
                problems.append(
                    (
                        ("approvals", "require_for", index),
                        f"{gated!r} is not one of this agent's tools "
                        f"({', '.join(names + [f'{s}.*' for s in servers]) or 'none'}); add it to "
                        "spec.tools (or an MCP server's allow list) or remove the rule",
                    )
                )
        # limit_to narrows a tool to some of the agent's channels or repositories; an agent
        # without that surface (a CLI agent, say) names the only places the tool may write.
        surfaces = self.surfaces
        bound = (
            set(surfaces.slack.channels if surfaces.slack else [])
            | set(surfaces.github.repos if surfaces.github else [])
            | set(surfaces.discord.channels if surfaces.discord else [])
            | set(surfaces.linear.teams if surfaces.linear else [])
        )
        for index, tool in enumerate(self.tools):
            family = tool.name.split(".", 1)[0]
            surface = {
                "slack": surfaces.slack,
                "github": surfaces.github,
                "discord": surfaces.discord,
                "linear": surfaces.linear,
            }.get(family)
            for position, target in enumerate(tool.limit_to):
                if surface is not None and target not in bound:
                    problems.append(
                        (
                            ("tools", index, "limit_to", position),
                            f"{target!r} is not one of this agent's channels or repositories "
                            f"({', '.join(sorted(bound)) or 'none'}); limit_to can only narrow them",
                        )
                    )
        if self.approvals.require_for and not self.approvals.approvers:
            problems.append(
                (
                    ("approvals", "approvers"),
                    "approvals.require_for is set but no approvers are named: "
                    "name at least one user who may approve (e.g. a Slack user id or cli:local)",
                )
            )
        if problems:
            raise rule_error(problems)
        return self

    def tool(self, name: str) -> ToolGrant | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def mcp_server(self, name: str) -> McpServer | None:
        return next((server for server in self.mcp_servers if server.name == name), None)

    def _gates_an_mcp_tool(self, gated: str) -> bool:
        """`server.tool` or `server.glob` where the server allows a tool that can match."""
        server_name, _, tool = gated.partition(".")
        server = self.mcp_server(server_name)
        return server is not None and any(patterns_overlap(tool, allowed) for allowed in server.allow)


class AgentConfig(Strict):
    apiVersion: Literal["openloop.ai/v1alpha1"]  # noqa: N815 - the YAML key
    kind: Literal["Agent"]
    metadata: Metadata
    spec: AgentSpecBody = AgentSpecBody()

    def name_problems(self) -> list[tuple[ProblemPath, str]]:
        """Rules that need the agent's own name, checked when a file is loaded (not when a
        stored agent or a task's snapshot is read: one applied before the rule still loads,
        and its tasks refuse the question when it is asked)."""
        return [
            (
                ("spec", "team", index),
                f"{teammate!r} is this agent itself: an agent cannot be its own teammate "
                "(each question would start another task of it); remove it from spec.team",
            )
            for index, teammate in enumerate(self.spec.team)
            if teammate == self.name
        ]

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def workspace(self) -> str:
        return self.metadata.workspace
