"""A tool an agent is granted (`spec.tools[]`): its permissions and where it may write.

Whether the runtime can run it is checked against the tool catalog the caller passes in the
validation context (config imports pydantic only, never the catalog). Pydantic only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, model_validator

from config.fields import ProblemPath, Strict, rule_error

# Validation context key: the runnable tools and the permission each needs, given by the
# caller from the tool catalog (config imports pydantic only). Without it, tool names are not
# checked: an agent read back from the store or from a task's history was checked when applied.
TOOLS_CONTEXT = "tool_permissions"


class ToolGrant(Strict):
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
                        f"{self.name!r}: MCP tools come from spec.mcp_servers (with their allow "
                        "list), not spec.tools; move it there",
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
