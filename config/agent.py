"""Pydantic models of an agent definition: `apiVersion: openloop.ai/v1alpha1`, `kind: Agent`.

Only pydantic lives here: the models are imported by workflow code (through the sandbox
pass-through) and by every surface, so they must stay free of I/O.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

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

# The native tools and the permission scope each needs. This mirrors
# `workflows.tool_catalog.NATIVE_TOOLS` (config may not import workflows); a unit test keeps
# the two equal, so a tool added there must be added here too.
NATIVE_TOOL_PERMISSIONS: dict[str, str] = {
    "memory.search": "memory:read",
    "memory.save": "memory:write",
    "slack.read_thread": "channels:history",
    "slack.post_message": "chat:write",
    "github.create_issue": "issues:write",
    "github.comment": "issues:write",
    "github.get_issue": "issues:read",
    "github.search_issues": "issues:read",
    "github.list_failed_runs": "actions:read",
    "github.get_job_log": "actions:read",
}
NATIVE_TOOL_NAMES: tuple[str, ...] = tuple(NATIVE_TOOL_PERMISSIONS)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# GitHub's rules: owner 1-39 letters, digits or dashes (not first); repo letters, digits, . _ -
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")

# A path inside the model (field names and list indexes) and what is wrong there.
ProblemPath = tuple[str | int, ...]


def rule_error(problems: list[tuple[ProblemPath, str]]) -> PydanticCustomError:
    """One error carrying several problems, each with the path below the validated model.

    Pydantic places a model validator's error at the model itself (e.g. `spec`); the loader
    reads `ctx["problems"]` to point each problem at its own field and line instead.
    """
    summary = "; ".join(
        f"{'.'.join(str(p) for p in path) or '(here)'}: {message}" for path, message in problems
    )
    context = {"summary": summary, "problems": problems}
    return PydanticCustomError("config_rule", "{summary}", context)


def parse_duration(text: str) -> float:
    """Seconds in a duration such as `90s`, `30m`, `72h`, `7d` or `1w`."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration; write a number and a unit, e.g. 90s, 30m, 72h, 7d")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _duration_text(value: Any) -> Any:
    """Reject non-text (`ttl: 72` reads as a number) and zero or unparseable durations early."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration; write a number and a unit, e.g. 90s, 30m, 72h, 7d")
    if parse_duration(value) <= 0:
        raise ValueError(f"{value!r} must be longer than zero")
    return value


Duration = Annotated[
    str,
    BeforeValidator(_duration_text),
    Field(description="A duration such as 30m, 72h or 7d"),
]


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
        problems: list[tuple[ProblemPath, str]] = [
            (
                (index,),
                f"{repo!r} is not a repository name; write owner/name, e.g. acme/platform "
                "(letters, digits, dashes in the owner; letters, digits, . _ - in the name)",
            )
            for index, repo in enumerate(repos)
            if not _REPO.match(repo) or repo.split("/")[1] in (".", "..")
        ]
        if problems:
            raise rule_error(problems)
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
            raise rule_error([(("server",), "an mcp tool needs `server` (the MCP server command or URL)")])
        return self

    @model_validator(mode="after")
    def _native_tool_known_and_granted(self) -> ToolSpec:
        # MCP tool names are free-form; native ones must be in the catalog and granted the
        # scope they act with, so a task never finds out at run time that it cannot work.
        if self.type != "native":
            return self
        needed = NATIVE_TOOL_PERMISSIONS.get(self.name)
        if needed is None:
            raise rule_error(
                [
                    (
                        ("name",),
                        f"{self.name!r} is not a native tool; known native tools: "
                        f"{', '.join(NATIVE_TOOL_NAMES)} (for an MCP tool set type: mcp)",
                    )
                ]
            )
        problems: list[tuple[ProblemPath, str]] = []
        if needed not in self.permissions:
            problems.append(
                (
                    ("permissions",),
                    f"{self.name} needs the permission {needed!r}; add it to permissions",
                )
            )
        if self.server is not None:
            problems.append((("server",), "only an mcp tool has a server; remove it"))
        if problems:
            raise rule_error(problems)
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
        for index, gated in enumerate(self.approvals.require_for):
            if gated not in names:
                problems.append(
                    (
                        ("approvals", "require_for", index),
                        f"{gated!r} is not one of this agent's tools "
                        f"({', '.join(names) or 'none'}); add it to spec.tools or remove the rule",
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
