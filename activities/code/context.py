"""The workspace a coding tool call acts on, set by the coding activity around the call.

Native tool handlers all take (arguments, call, runtime); a coding tool also needs the
workspace the task holds, which only the coding activity knows (it arrives in
`CodeToolInput`). The activity sets it here for the length of one call; a coding tool called
anywhere else hears that it cannot run there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from activities.tool_errors import ToolError, ToolErrorKind
from workflows.code_types import CodeSetup, TestRun
from workflows.egress_blocked import CommandEgress
from workflows.loop_types import WorkspaceHandle


@dataclass
class CodeWorkspace:
    root: Path  # the repository's root on this worker
    handle: WorkspaceHandle
    setup: CodeSetup
    task_id: str
    # Filled by code.run_tests, for the activity to return in CodeToolResult.tests.
    tests: TestRun | None = None
    # Filled by a command run with a network allowlist, for CodeToolResult.egress.
    egress: CommandEgress | None = None


_CURRENT: ContextVar[CodeWorkspace | None] = ContextVar("openloop_code_workspace", default=None)


def current_workspace() -> CodeWorkspace:
    workspace = _CURRENT.get()
    if workspace is None:
        raise ToolError(
            ToolErrorKind.FAILED,
            "coding tools run only in a task that has a workspace (an agent with spec.coding "
            "set, on a loop worker); this task has none",
        )
    return workspace


@contextmanager
def using_workspace(workspace: CodeWorkspace) -> Iterator[CodeWorkspace]:
    """`workspace` is the current one inside the block."""
    token = _CURRENT.set(workspace)
    try:
        yield workspace
    finally:
        _CURRENT.reset(token)
