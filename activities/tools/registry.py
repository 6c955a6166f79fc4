"""Tool registry: name -> async handler. Definitions (schema, permission) are in
`workflows.tool_catalog`; this maps each to the code that runs it.

A handler raises `ToolError` for an outcome the model should hear about (not found,
invalid input, permission); any other exception is a failure Temporal retries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from activities.runtime import Runtime
from workflows.types import ToolCallInput

ToolHandler = Callable[[ToolCallInput, Runtime], Awaitable[str]]

_HANDLERS: dict[str, ToolHandler] = {}


class ToolError(Exception):
    """A tool outcome reported back to the model instead of retried."""

    def __init__(self, kind: str, message: str):
        self.kind = kind  # not_found | invalid | permission | failed
        super().__init__(message)


def handler(name: str) -> Callable[[ToolHandler], ToolHandler]:
    def register(fn: ToolHandler) -> ToolHandler:
        _HANDLERS[name] = fn
        return fn

    return register


def get_handler(name: str) -> ToolHandler | None:
    _load_builtin_tools()
    return _HANDLERS.get(name)


def _load_builtin_tools() -> None:
    # Imported for their registrations; kept lazy so importing the registry stays cheap.
    import importlib

    for module in ("memory_tools", "slack_tools", "github_tools"):
        try:
            importlib.import_module(f"activities.tools.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"activities.tools.{module}":
                raise
