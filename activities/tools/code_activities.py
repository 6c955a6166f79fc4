"""The coding activity: one coding tool call, on the loop worker that holds the task's workspace.

It runs on the workspace's own queue (`WorkspaceHandle.task_queue`), checks this worker
still holds the workspace (WORKSPACE_LOST otherwise, so the workflow takes it again), and
runs the call through the tool registry with the workspace set for it. After a tool that may
change files (and after code.diff, which shows them) the workspace's diff from its base
commit is stored under its hash with its changed files whole (`activities.store.changes`):
the pull request is later made from exactly those, on a worker that does not hold the
workspace. Calls on one workspace run one at a time, so git never races itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.code.context import CodeWorkspace, using_workspace
from activities.loops import workspace
from activities.loops.host import held_workspace
from activities.runtime import runtime
from activities.store import loops as loop_rows
from activities.store.changes import FileChange, save_changes
from activities.store.tool_calls import bound_and_audit
from activities.tools.tool_activities import execute_tool
from workflows.code_types import CodeActivity, CodeToolInput, CodeToolResult
from workflows.errors import ErrorType
from workflows.loop_types import DiffSnapshot

# The tools after which the workspace's diff is stored and returned.
DIFF_AFTER = frozenset({"code.edit_file", "code.write_file", "code.run", "code.run_tests", "code.diff"})
_GITLINK = "160000"  # a nested repository: no file to commit
_DELETED = "000000"
_WAIT_BEAT_SECONDS = 1.0

_LOCKS: dict[str, asyncio.Lock] = {}


async def _beat_while_waiting() -> None:
    while True:
        activity.heartbeat({"waiting": "another tool call on this workspace"})
        await asyncio.sleep(_WAIT_BEAT_SECONDS)


@asynccontextmanager
async def _one_at_a_time(root: Path) -> AsyncIterator[None]:
    lock = _LOCKS.setdefault(str(root), asyncio.Lock())
    # A call waiting behind a long test run still beats, or it would look like a lost worker.
    beating = asyncio.create_task(_beat_while_waiting()) if lock.locked() else None
    try:
        async with lock:
            if beating is not None:
                beating.cancel()
            yield
    finally:
        if beating is not None:
            beating.cancel()


def _blobs(batch: bytes) -> list[bytes]:
    """The contents in `git cat-file --batch` output: `<sha> blob <size>\\n<content>\\n` each."""
    contents, at = [], 0
    while at < len(batch):
        header_end = batch.index(b"\n", at)
        size = int(batch[at:header_end].split()[2])
        contents.append(batch[header_end + 1 : header_end + 1 + size])
        at = header_end + 1 + size + 1
    return contents


async def changed_files(root: Path, base_commit: str) -> list[FileChange]:
    """Every file the staged workspace changes from its base commit: its path, mode and whole
    content (a symbolic link's is its target; a deleted file's is None)."""
    raw = await workspace.workspace_git(
        root, "diff", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", base_commit
    )
    fields = raw.split(b"\0")
    entries: list[tuple[str, str, str | None]] = []  # (path, mode, blob; None: deleted)
    for header, name in zip(fields[0::2], fields[1::2], strict=False):
        if not header.startswith(b":"):
            break
        old_mode, new_mode, _, blob, _ = header[1:].decode().split(" ")
        try:
            path = name.decode()
        except UnicodeDecodeError:
            raise workspace.WorkspaceError(f"a changed file's name is not UTF-8: {name!r}") from None
        if _GITLINK in (old_mode, new_mode):
            continue
        # A deleted file keeps the mode it had: a tree entry that removes it still names one.
        entries.append((path, old_mode, None) if new_mode == _DELETED else (path, new_mode, blob))
    kept = [blob for _, _, blob in entries if blob is not None]
    batch = b""
    if kept:
        listed = "\n".join(kept).encode() + b"\n"
        batch = await workspace.workspace_git(root, "cat-file", "--batch", stdin=listed)
    contents = iter(_blobs(batch))
    return [
        FileChange(path=path, mode=mode, content=None if blob is None else next(contents))
        for path, mode, blob in entries
    ]


async def record_diff(pool: AsyncConnectionPool, root: Path, base_commit: str) -> DiffSnapshot:
    """Store the workspace's diff and its changed files under the diff's hash."""
    try:
        patch = await workspace.diff(root, base_commit)
        changes = await changed_files(root, base_commit)
    except workspace.WorkspaceError as exc:
        raise ApplicationError(str(exc), type=ErrorType.WORKSPACE_ERROR, non_retryable=True) from None
    sha = await loop_rows.save_diff(pool, patch)
    await save_changes(pool, sha, base_commit, changes)
    return workspace.snapshot(sha, patch)


@activity.defn(name=CodeActivity.RUN_TOOL)
async def run_code_tool(inp: CodeToolInput) -> CodeToolResult:
    root = held_workspace(inp.workspace)
    if not inp.call.tool.startswith("code."):
        raise ApplicationError(
            f"{inp.call.tool} is not a coding tool; only code.* tools run on a workspace's queue",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    rt = runtime()
    pool = await rt.pool()
    current = CodeWorkspace(root=root, handle=inp.workspace, setup=inp.setup, task_id=inp.call.task_id)
    snapshot: DiffSnapshot | None = None
    async with _one_at_a_time(root):
        with using_workspace(current):
            result = await execute_tool(inp.call, rt)
        if inp.call.tool in DIFF_AFTER:
            snapshot = await record_diff(pool, root, inp.workspace.base_commit)
    tests = current.tests
    if tests is not None and snapshot is not None:
        # The diff as the run left it: the same one this result returns, so a pull request
        # of that diff is known to have passed (or failed) its tests.
        tests = tests.model_copy(update={"diff_sha256": snapshot.sha256})
    async with pool.connection() as conn:
        bounded = await bound_and_audit(conn, inp.call, result)
    return CodeToolResult(result=bounded, diff=snapshot, tests=tests, egress=current.egress)


CODE_WORKSPACE_ACTIVITIES = (run_code_tool,)
