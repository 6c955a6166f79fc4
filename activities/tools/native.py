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
`ToolSpec`. A handler raises `ToolError` (`activities.tool_errors`) for an outcome the model
should hear about (not found, invalid input, permission); any other exception is a failure
Temporal retries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from activities.runtime import Runtime
from activities.tool_errors import ToolError, ToolErrorKind
from workflows.tool_args import NonEmpty, PositiveInt, ToolArgs, arguments_schema
from workflows.tool_catalog import ToolRuns, ToolSpec, WriteBound
from workflows.types import ToolCallInput

# The arguments' base and types are shared with the tools the workflow runs itself.
__all__ = ["NativeTool", "NonEmpty", "PositiveInt", "ToolArgs", "arguments_schema", "declared", "native_tool"]

Handler = Callable[[Any, ToolCallInput, Runtime], Awaitable[str]]


@dataclass(frozen=True)
class NativeTool:
    spec: ToolSpec
    args: type[ToolArgs]
    handler: Handler

    async def run(self, call: ToolCallInput, rt: Runtime) -> str:
        try:
            args = self.args.model_validate(call.arguments)
        except ValueError as exc:
            raise ToolError(ToolErrorKind.INVALID, f"invalid arguments for {self.spec.name}: {exc}") from None
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
