"""A loop's workspace on disk: made from a repository, diffed from its base, rebuilt from a diff.

Every git command here runs on the worker, outside the sandbox, with an environment of its
own: the clone's credentials travel as a one-command HTTP header in that environment, never
in a URL, a file in the workspace, a log or an argument another process could read.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from workflows.loop_types import DiffSnapshot

# Files a project's own commands leave behind that are never part of a fix.
_EXCLUDED = ("__pycache__/", "*.pyc", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/", "node_modules/")
_AUTHOR = ("-c", "user.name=OpenLoop", "-c", "user.email=loops@openloop.invalid")
_GIT_TIMEOUT_SECONDS = 600.0


class WorkspaceError(RuntimeError):
    """The workspace could not be made or read; the message says which command and why."""


@dataclass(frozen=True)
class GitRemote:
    url: str
    token: str | None = None


def _git_env(token: str | None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "LANG": "C.UTF-8",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        }
    return env


async def git(cwd: Path | None, *args: str, token: str | None = None, stdin: bytes | None = None) -> bytes:
    """Run git; its stdout, or WorkspaceError with its stderr (tokens never appear in either)."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=cwd,
        env=_git_env(token),
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), _GIT_TIMEOUT_SECONDS)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    if proc.returncode != 0:
        shown = " ".join(a for a in args if not a.startswith("http"))
        message = err.decode(errors="replace").strip()[-1500:]
        raise WorkspaceError(f"git {shown} failed: {message}")
    return out


def _prepare(path: Path) -> None:
    excludes = path / ".git" / "info" / "exclude"
    excludes.parent.mkdir(parents=True, exist_ok=True)
    with excludes.open("a") as handle:
        handle.write("\n".join(_EXCLUDED) + "\n")


async def clone(remote: GitRemote, base: str, path: Path) -> str:
    """Clone `base` of a remote repository into `path`; the base commit's id."""
    path.parent.mkdir(parents=True, exist_ok=True)
    await git(
        None,
        "clone",
        "--quiet",
        "--no-tags",
        "--branch",
        base,
        "--",
        remote.url,
        str(path),
        token=remote.token,
    )
    _prepare(path)
    return (await git(path, "rev-parse", "HEAD")).decode().strip()


def _copy_tree(source: Path, path: Path, names: list[str] | None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if names is None:
        shutil.copytree(
            source, path, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git")
        )
        return
    for name in names:
        origin = source / name
        if not origin.exists() and not origin.is_symlink():
            continue  # deleted but not yet committed
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, target, follow_symlinks=False)


async def copy_local(source: Path, path: Path) -> str:
    """A workspace from a local directory: what `git ls-files` would ship when it is a
    repository (tracked and untracked files, ignored ones left out; uncommitted edits
    included), every file otherwise. It gets a repository of its own with one base commit."""
    if not await asyncio.to_thread(source.is_dir):
        raise WorkspaceError(f"{source} is not a directory")
    names: list[str] | None = None
    if await asyncio.to_thread((source / ".git").exists):
        listed = await git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        names = sorted({n for n in listed.decode().split("\0") if n})
    await asyncio.to_thread(_copy_tree, source, path, names)
    await git(path, "init", "--quiet", "--initial-branch", "openloop-base")
    _prepare(path)
    await git(path, "add", "--all")
    await git(path, *_AUTHOR, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", "base")
    return (await git(path, "rev-parse", "HEAD")).decode().strip()


async def diff(path: Path, base_commit: str) -> bytes:
    """Everything changed since the base commit, new files included, as a binary patch."""
    await git(path, "add", "--all")
    return await git(path, "diff", "--cached", "--binary", "--no-color", "--no-ext-diff", base_commit)


async def apply(path: Path, patch: bytes) -> None:
    if patch:
        await git(path, "apply", "--binary", "--index", "--whitespace=nowarn", "-", stdin=patch)


def snapshot(sha: str, patch: bytes) -> DiffSnapshot:
    """Counts of a stored diff: files changed, lines added and removed."""
    files = insertions = deletions = 0
    for line in patch.decode(errors="replace").splitlines():
        if line.startswith("diff --git "):
            files += 1
        elif line.startswith("+") and not line.startswith("+++"):
            insertions += 1
        elif line.startswith("-") and not line.startswith("---"):
            deletions += 1
    return DiffSnapshot(sha256=sha, files_changed=files, insertions=insertions, deletions=deletions)


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
