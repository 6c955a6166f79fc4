"""The loop worker this process is: its name, the task queue only it polls, where its
workspaces live. `workers.loops` sets it when a loop worker starts."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

from temporalio.exceptions import ApplicationError

from activities.loops.workspace import git_dir
from workflows.errors import ErrorType
from workflows.loop_types import LOOP_TASK_QUEUE, WorkspaceHandle


@dataclass(frozen=True)
class LoopHost:
    name: str
    task_queue: str
    workspaces: Path

    def loop_dir(self, loop_id: str) -> Path:
        return self.workspaces / loop_id

    def repo(self, loop_id: str, attempt: int = 1) -> Path:
        return self.loop_dir(loop_id) / ("repo" if attempt == 1 else f"repo-{attempt}")

    def log(self, loop_id: str, round_: int, step: str) -> Path:
        return self.loop_dir(loop_id) / "logs" / f"round-{round_}-{step}.log"

    @property
    def setup_cache(self) -> Path:
        """What `sandbox.setup` left behind, per key (`activities.loops.setup_cache`): beside the
        workspaces, on their filesystem, so a restore can share blocks; no loop id starts with a dot."""
        return self.workspaces / ".setup-cache"


_host: LoopHost | None = None


def configure_host(
    workspaces: Path, name: str | None = None, queue_prefix: str = LOOP_TASK_QUEUE
) -> LoopHost:
    """This process's identity as a loop worker; the queue name is unique to it."""
    global _host
    name = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    workspaces.mkdir(parents=True, exist_ok=True)
    _host = LoopHost(name=name, task_queue=f"{queue_prefix}-{name}", workspaces=workspaces.resolve())
    return _host


def loop_host() -> LoopHost:
    if _host is None:
        raise ApplicationError(
            "this worker is not a loop worker: start one with `openloop worker --loops`",
            type=ErrorType.WORKSPACE_LOST,
            non_retryable=True,
        )
    return _host


def held_workspace(handle: WorkspaceHandle) -> Path:
    """The workspace's path when this worker holds it; WORKSPACE_LOST otherwise, so the
    workflow takes the workspace again (on whichever worker picks it up)."""
    host = loop_host()
    path = Path(handle.path)
    if handle.worker != host.name or not git_dir(path).is_dir():
        raise ApplicationError(
            f"{host.name} does not hold the workspace of {handle.loop_id}",
            type=ErrorType.WORKSPACE_LOST,
            non_retryable=True,
        )
    return path
