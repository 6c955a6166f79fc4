"""How a native tool is declared: once, as an arguments model, its metadata and its handler.

    class CommentArgs(ToolArgs):
        repo: Repo
        number: PositiveInt
        body: NonEmpty

    @native_tool("github.comment", CommentArgs, "Comment on a GitHub issue or pull request.",
                 permission="issues:write", writes=True, bound_argument="repo",
                 bound_by=WriteBound.GITHUB_REPOS)
    async def comment(args: CommentArgs, call: ToolCallInput, rt: Runtime) -> str: ...

The JSON schema the model sees is generated from the arguments model (canonical, stable:
no titles; an optional argument may be omitted, never null). Config validation, the
workflow's checks, the model's tool list and this dispatch all read the resulting
`ToolSpec`. A handler raises `ToolError` for an outcome the model should hear about (not
found, invalid input, permission); any other exception is a failure Temporal retries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from activities.runtime import Runtime
from workflows.tool_catalog import ToolRuns, ToolSpec, WriteBound, canonical_schema
from workflows.types import AuditEvent, ToolCallInput, ToolCallResult

NonEmpty = Annotated[str, Field(min_length=1)]
PositiveInt = Annotated[int, Field(ge=1)]


class ToolArgs(BaseModel):
    """Base of every arguments model: unknown arguments are errors the model hears about."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Handler = Callable[[Any, ToolCallInput, Runtime], Awaitable[str]]


class ToolError(Exception):
    """A tool outcome reported back to the model instead of retried."""

    def __init__(self, kind: str, message: str):
        self.kind = kind  # not_found | invalid | permission | failed
        super().__init__(message)


@dataclass(frozen=True)
class NativeTool:
    spec: ToolSpec
    args: type[ToolArgs]
    handler: Handler

    async def run(self, call: ToolCallInput, rt: Runtime) -> str:
        try:
            args = self.args.model_validate(call.arguments)
        except ValueError as exc:
            raise ToolError("invalid", f"invalid arguments for {self.spec.name}: {exc}") from None
        return await self.handler(args, call, rt)


_DECLARED: dict[str, NativeTool] = {}


def native_tool(
    name: str,
    args: type[ToolArgs],
    description: str,
    *,
    permission: str,
    writes: bool,
    runs: ToolRuns = ToolRuns.REMOTE,
    bound_argument: str | None = None,
    bound_by: WriteBound | None = None,
) -> Callable[[Handler], Handler]:
    """Declare a native tool on its handler."""
    if (bound_argument is None) != (bound_by is None):
        raise ValueError(f"{name}: bound_argument and bound_by go together")
    spec = ToolSpec(
        name=name,
        description=description,
        parameters=arguments_schema(args),
        permission=permission,
        writes=writes,
        runs=runs,
        bound_argument=bound_argument,
        bound_by=bound_by,
    )

    def register(handler: Handler) -> Handler:
        if name in _DECLARED:
            raise ValueError(f"the native tool {name!r} is declared twice")
        _DECLARED[name] = NativeTool(spec, args, handler)
        return handler

    return register


def declared() -> dict[str, NativeTool]:
    return dict(_DECLARED)


def arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, canonical: no titles, optional arguments omitted not null."""
    return dict(canonical_schema(model.model_json_schema()))


def tool_audit(inp: ToolCallInput, result: ToolCallResult) -> AuditEvent:
    """The audit row of one tool call; keyed by the call, so writing it again adds nothing.
    A handler may write it itself, in the transaction of its own writes."""
    return AuditEvent(
        task_id=inp.task_id,
        step=inp.step,
        key=f"{inp.step}:{inp.call_id}:tool",
        agent=inp.memory.agent,
        workspace=inp.memory.workspace,
        channel=inp.context.channel,
        kind="tool_call",
        actor=inp.requested_by,
        tool=inp.tool,
        arguments=inp.arguments,
        outcome="ok" if result.ok else f"error:{result.error_kind}",
        approver=inp.approval.approver if inp.approval else None,
    )
