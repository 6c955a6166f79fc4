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
    ValidationInfo,
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

# Validation context key: the runnable tools and the permission each needs, given by the
# caller from the tool catalog (config imports pydantic only). Without it, tool names are not
# checked: an agent read back from the store or from a task's history was checked when applied.
TOOLS_CONTEXT = "tool_permissions"

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


class ToolGrant(_Strict):
    """A tool the agent may call, the permissions it is granted, and where it may write."""

    name: str = Field(min_length=1)
    type: Literal["native", "mcp"] = "native"
    permissions: list[str] = []
    server: str | None = Field(default=None, description="MCP server command or URL")
    limit_to: list[str] = Field(
        default=[],
        description="Narrows a writing tool to these of the agent's channels or repositories",
    )

    @model_validator(mode="after")
    def _runnable_and_granted(self, info: ValidationInfo) -> ToolGrant:
        # A tool the runtime cannot run, or runs without the scope it acts with, is an error
        # here: a task must never find out at run time that it cannot work.
        if self.type == "mcp":
            raise rule_error(
                [
                    (
                        ("type",),
                        f"{self.name!r}: this runtime cannot run MCP tools yet, and a task "
                        "would silently lose it; remove the tool (or use a native one)",
                    )
                ]
            )
        known: dict[str, str] | None = (info.context or {}).get(TOOLS_CONTEXT)
        if known is None:
            return self
        needed = known.get(self.name)
        if needed is None:
            raise rule_error(
                [
                    (
                        ("name",),
                        f"{self.name!r} is not a native tool; known native tools: {', '.join(known)}",
                    )
                ]
            )
        problems: list[tuple[ProblemPath, str]] = []
        if needed not in self.permissions:
            problems.append(
                (("permissions",), f"{self.name} needs the permission {needed!r}; add it to permissions")
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

    @property
    def wall_clock_seconds(self) -> float:
        return parse_duration(self.wall_clock)


class AgentSpecBody(_Strict):
    instructions: str = "You are a helpful teammate. Be brief and concrete."
    surfaces: Surfaces = Surfaces()
    memory: MemorySpec = MemorySpec()
    model_policy: ModelPolicy = ModelPolicy()
    tools: list[ToolGrant] = []
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
        # limit_to narrows a tool to some of the agent's channels or repositories; an agent
        # without that surface (a CLI agent, say) names the only places the tool may write.
        bound = set(self.surfaces.slack.channels if self.surfaces.slack else []) | set(
            self.surfaces.github.repos if self.surfaces.github else []
        )
        for index, tool in enumerate(self.tools):
            family = tool.name.split(".", 1)[0]
            surface = {"slack": self.surfaces.slack, "github": self.surfaces.github}.get(family)
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
