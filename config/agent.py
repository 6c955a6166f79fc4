"""Pydantic models of an agent definition: `apiVersion: openloop.ai/v1alpha1`, `kind: Agent`.

Only pydantic lives here: the models are imported by workflow code (through the sandbox
pass-through) and by every surface, so they must stay free of I/O.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

API_VERSION = "openloop.ai/v1alpha1"

# Task kinds a model route may match. A route to any other kind is a config error.
TASK_KINDS: tuple[str, ...] = (
    "chat",
    "summarize",
    "triage",
    "investigate_ci",
    "code_review",
    "summarize_conversation",
)

# Safe defaults that are always on, even when `spec.limits` is omitted.
DEFAULT_MAX_ITERATIONS = 12
DEFAULT_TOKEN_LIMIT = 200_000
DEFAULT_WALL_CLOCK = "30m"
DEFAULT_APPROVAL_TTL = "72h"
DEFAULT_PER_TASK_USD = 1.0

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def parse_duration(text: str) -> float:
    """Seconds in a duration such as `90s`, `30m`, `72h`, `7d` or `1w`."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(
            f"{text!r} is not a duration; write a number and a unit, e.g. 90s, 30m, 72h, 7d"
        )
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


Duration = Annotated[str, Field(description="A duration such as 30m, 72h or 7d")]


class _Strict(BaseModel):
    # Unknown keys are errors: a typo in a YAML key must not silently drop a rule.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metadata(_Strict):
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


class TriggerPolicy(_Strict):
    """Who may start a task from a surface. An empty policy means everyone in the channel."""

    everyone: bool = True
    users: list[str] = []
    usergroups: list[str] = []


class SlackSurface(_Strict):
    channels: list[str] = Field(min_length=1, description="Slack channel ids, e.g. C0123ABCD")
    triggers: TriggerPolicy = TriggerPolicy()


class GitHubCIWatch(_Strict):
    enabled: bool = True
    branches: list[str] = ["main"]
    report_to: list[Literal["commit_comment", "pr_comment", "slack"]] = ["pr_comment"]


class GitHubSurface(_Strict):
    repos: list[str] = Field(min_length=1, description="owner/name of each repository")
    handle: str = "@openloop"
    allowed_associations: list[str] = ["OWNER", "MEMBER", "COLLABORATOR"]
    allowed_bots: list[str] = []
    ci: GitHubCIWatch = GitHubCIWatch(enabled=False)

    @field_validator("repos")
    @classmethod
    def _owner_slash_name(cls, repos: list[str]) -> list[str]:
        for repo in repos:
            if repo.count("/") != 1 or not all(repo.split("/")):
                raise ValueError(f"{repo!r} is not owner/name")
        return repos


class Surfaces(_Strict):
    slack: SlackSurface | None = None
    github: GitHubSurface | None = None
    cli: bool = True


class MemoryScope(StrEnum):
    CHANNEL = "channel"
    AGENT = "agent"
    WORKSPACE = "workspace"


OFFLINE_EMBEDDING = "offline/hashing-256"


class MemorySpec(_Strict):
    scope: MemoryScope = MemoryScope.CHANNEL
    backend: Literal["postgres"] = "postgres"
    retention_days: int = Field(default=90, ge=1)
    embedding: str = Field(
        default=OFFLINE_EMBEDDING,
        description="A LiteLLM embedding model, or the offline default that needs no key",
    )
    recall_k: int = Field(default=5, ge=0, le=50)


class RouteMatch(_Strict):
    task: str

    @field_validator("task")
    @classmethod
    def _known_task(cls, task: str) -> str:
        if task not in TASK_KINDS:
            raise ValueError(f"unknown task kind {task!r}; known kinds: {', '.join(TASK_KINDS)}")
        return task


class ModelRoute(_Strict):
    match: RouteMatch
    model: str = Field(min_length=1)


class ModelPolicy(_Strict):
    default: str = Field(default="offline/demo", min_length=1)
    routes: list[ModelRoute] = []
    fallbacks: list[str] = []
    max_output_tokens: int = Field(default=4096, gt=0)
    context_window: int | None = Field(default=None, gt=0)

    def models_for(self, task_kind: str) -> list[str]:
        """The model for a task kind first, then the fallbacks, without repeats."""
        chosen = next((r.model for r in self.routes if r.match.task == task_kind), self.default)
        ordered = [chosen, *self.fallbacks]
        return list(dict.fromkeys(ordered))


class ToolSpec(_Strict):
    name: str = Field(min_length=1)
    type: Literal["native", "mcp"] = "native"
    permissions: list[str] = []
    server: str | None = Field(default=None, description="MCP server command or URL")

    @model_validator(mode="after")
    def _mcp_needs_server(self) -> ToolSpec:
        if self.type == "mcp" and not self.server:
            raise ValueError("an mcp tool needs `server` (the MCP server command or URL)")
        return self


class ApprovalsSpec(_Strict):
    require_for: list[str] = []
    approvers: list[str] = []
    ttl: Duration = DEFAULT_APPROVAL_TTL
    on_denied: Literal["continue", "stop"] = "continue"

    @field_validator("ttl")
    @classmethod
    def _ttl(cls, ttl: str) -> str:
        parse_duration(ttl)
        return ttl

    @property
    def ttl_seconds(self) -> float:
        return parse_duration(self.ttl)


class BudgetSpec(_Strict):
    monthly_usd: float | None = Field(default=None, ge=0)
    per_task_usd: float = Field(default=DEFAULT_PER_TASK_USD, ge=0)
    per_channel_monthly_usd: float | None = Field(default=None, ge=0)
    on_exceeded: Literal["block", "warn"] = "block"


class LimitsSpec(_Strict):
    max_iterations: int = Field(default=DEFAULT_MAX_ITERATIONS, ge=1, le=1000)
    token_limit: int = Field(default=DEFAULT_TOKEN_LIMIT, ge=1)
    wall_clock: Duration = DEFAULT_WALL_CLOCK
    no_progress_repeats: int = Field(default=3, ge=2)

    @field_validator("wall_clock")
    @classmethod
    def _wall_clock(cls, wall_clock: str) -> str:
        parse_duration(wall_clock)
        return wall_clock

    @property
    def wall_clock_seconds(self) -> float:
        return parse_duration(self.wall_clock)


class AgentSpecBody(_Strict):
    instructions: str = "You are a helpful teammate. Be brief and concrete."
    surfaces: Surfaces = Surfaces()
    memory: MemorySpec = MemorySpec()
    model_policy: ModelPolicy = ModelPolicy()
    tools: list[ToolSpec] = []
    approvals: ApprovalsSpec = ApprovalsSpec()
    budget: BudgetSpec = BudgetSpec()
    limits: LimitsSpec = LimitsSpec()

    @model_validator(mode="after")
    def _cross_field_rules(self) -> AgentSpecBody:
        names = [tool.name for tool in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tools: {', '.join(duplicates)} listed more than once")
        for gated in self.approvals.require_for:
            if gated not in names:
                raise ValueError(
                    f"approvals.require_for names {gated!r}, which is not one of this agent's "
                    f"tools ({', '.join(names) or 'none'}); add it to spec.tools or remove the rule"
                )
        if self.approvals.require_for and not self.approvals.approvers:
            raise ValueError(
                "approvals.require_for is set but approvals.approvers is empty: "
                "name at least one user who may approve"
            )
        return self

    def tool(self, name: str) -> ToolSpec | None:
        return next((tool for tool in self.tools if tool.name == name), None)


class AgentConfig(_Strict):
    apiVersion: Literal["openloop.ai/v1alpha1"]  # noqa: N815 - the YAML key
    kind: Literal["Agent"]
    metadata: Metadata
    spec: AgentSpecBody = AgentSpecBody()

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def workspace(self) -> str:
        return self.metadata.workspace
