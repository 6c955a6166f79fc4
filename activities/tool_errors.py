"""What a tool handler raises for an outcome the model should hear about, instead of a retry.

A handler raises `ToolError` for something not found, invalid input, a permission it lacks or
a failure the model can work around; the tool activity turns it into a failed
`ToolCallResult` whose `error_kind` is the kind's value ("Error (not_found): …"). Any other
exception is a failure Temporal retries. Every family that reaches a system (GitHub, Slack,
the workspace) raises it and the tool dispatch catches it, so this module imports nothing
from `activities`: each of them imports it downward.
"""

from __future__ import annotations

from enum import StrEnum


class ToolErrorKind(StrEnum):
    """The kinds of a refused tool call; the values are recorded in history and the audit."""

    NOT_FOUND = "not_found"
    INVALID = "invalid"
    PERMISSION = "permission"
    FAILED = "failed"


class ToolError(Exception):
    """A tool outcome reported back to the model instead of retried."""

    def __init__(self, kind: ToolErrorKind, message: str):
        self.kind = ToolErrorKind(kind)
        super().__init__(message)
