"""A loop's workspace on disk: made from a repository, diffed from its base, rebuilt from a diff.

Every git command here runs on the worker, outside the sandbox, with an environment of its
own: the clone's credentials travel as a one-command HTTP header in that environment, never
in a URL, a file in the workspace, a log or an argument another process could read.

Nothing a sandboxed command can write is ever read by git here as configuration. The
workspace's git directory lives beside the workspace (`repo.git` next to `repo`), which the
sandbox never mounts writable (it sees it read-only at `.git`); every git command on the
workspace names that directory explicitly and runs with no system or global config, no
hooks, no fsmonitor, no external diff and no textconv. A `.git` folder or file a command
plants in the workspace is ignored, and a `.gitattributes` can name no driver, because
drivers are defined only in config.
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


# Whatever the repository's own config says: nothing runs, nothing is read from elsewhere.
_FIXED_CONFIG = (
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.untrackedCache=false",
    "-c", "core.sshCommand=false",
    "-c", "diff.external=",
    "-c", "protocol.allow=never",
)  # fmt: skip


def git_dir(path: Path) -> Path:
    """Where the workspace's repository lives: beside it, never inside it."""
    return path.with_name(f"{path.name}.git")


def _git_env(token: str | None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "LANG": "C.UTF-8",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
    }
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        }
    return env


async def git(
    cwd: Path | None,
    *args: str,
    token: str | None = None,
    stdin: bytes | None = None,
    extra_env: dict[str, str] | None = None,
) -> bytes:
    """Run git; its stdout, or WorkspaceError with its stderr (tokens never appear in either)."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=cwd,
        env=_git_env(token) | (extra_env or {}),
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


async def workspace_git(path: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """git on a workspace, with its repository named outright and a fixed config (see above)."""
    env = {"GIT_DIR": str(git_dir(path)), "GIT_WORK_TREE": str(path)}
    return await git(path, *_FIXED_CONFIG, *args, stdin=stdin, extra_env=env)


def _prepare(path: Path) -> None:
    excludes = git_dir(path) / "info" / "exclude"
    excludes.parent.mkdir(parents=True, exist_ok=True)
    with excludes.open("a") as handle:
        handle.write("\n".join(_EXCLUDED) + "\n")
    # The mount point of the read-only view of the repository the sandbox gets.
    marker = path / ".git"
    if marker.is_symlink() or marker.is_file():
        marker.unlink()
    marker.mkdir(exist_ok=True)


async def clone(remote: GitRemote, base: str, path: Path) -> str:
    """Clone `base` of a remote repository into `path`; the base commit's id."""
    path.parent.mkdir(parents=True, exist_ok=True)
    await git(
        None,
        "clone",
        "--quiet",
        "--no-tags",
        f"--separate-git-dir={git_dir(path)}",
        "--branch",
        base,
        "--",
        remote.url,
        str(path),
        token=remote.token,
    )
    _prepare(path)
    return (await workspace_git(path, "rev-parse", "HEAD")).decode().strip()


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
    await workspace_git(path, "init", "--quiet", "--initial-branch", "openloop-base")
    _prepare(path)
    await workspace_git(path, "add", "--all")
    await workspace_git(path, *_AUTHOR, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", "base")
    return (await workspace_git(path, "rev-parse", "HEAD")).decode().strip()


def _nested_repositories(path: Path) -> list[str]:
    """Folders below the root holding a `.git` of their own: git would take each for a
    submodule (and refuse one with no commit), so they stay out of the diff."""
    skipped = {name.rstrip("/") for name in _EXCLUDED if name.endswith("/")}
    nested: list[str] = []
    for folder, folders, names in os.walk(path, followlinks=False):
        if folder != str(path) and (".git" in folders or ".git" in names):
            nested.append(Path(folder).relative_to(path).as_posix())
            folders.clear()
            continue
        folders[:] = [name for name in folders if name not in skipped and name != ".git"]
    return nested


async def diff(path: Path, base_commit: str) -> bytes:
    """Everything changed since the base commit, new files included, as a binary patch."""
    nested = await asyncio.to_thread(_nested_repositories, path)
    await workspace_git(
        path, "add", "--all", "--", ".", *(f":(exclude,top,literal){name}" for name in nested)
    )
    return await workspace_git(
        path, "diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", base_commit
    )


async def apply(path: Path, patch: bytes) -> None:
    if patch:
        await workspace_git(path, "apply", "--binary", "--index", "--whitespace=nowarn", "-", stdin=patch)


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
    shutil.rmtree(git_dir(path), ignore_errors=True)
