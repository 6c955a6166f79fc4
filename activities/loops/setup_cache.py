"""The loop worker's cache of what `sandbox.setup` left in a workspace (`.venv/`,
`node_modules/`): one folder per key, the key a hash of the repository, its lockfiles, the
setup itself and the worker's Python; the least recently used folders go past a byte budget.

A saved folder is written under a temporary name and renamed into place, so a reader sees a
whole one or none, and of two workspaces saving the same key the first wins. A restore copies
(`cp -a --reflink=auto`, never hard links: the sandbox writes in the workspace, and would
write into the cache through a link), then rewrites the old workspace's path in the copied
text files and links (venv scripts, `.pth` files of editable installs), since every workspace
has a path of its own. A copied file that names the old path in binary form is left as it is,
except compiled Python (`.pyc`), which is dropped and rebuilt from its source.

What the sandbox wrote is copied and searched for a path, never interpreted, and no link it
made is followed: every path is checked to pass through real folders only."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from activities.loops.workspace import workspace_git
from workflows.egress_report import readable_bytes
from workflows.loop_types import Sandbox

__all__ = ["CacheEntry", "cache_key", "changed", "evict", "exclude", "restore", "save", "untracked"]

LOCKFILES = frozenset(
    {"pyproject.toml", "poetry.lock", "uv.lock", "Pipfile.lock", "package-lock.json", "yarn.lock",
     "pnpm-lock.yaml", "Cargo.lock", "go.sum"}
)  # fmt: skip
_REQUIREMENTS = re.compile(r"^requirements.*\.txt$")
META = "meta.json"
USED = "used"  # its modification time is the folder's last use
RELOCATE_MAX_BYTES = 64 << 20  # a bigger file is not searched for the old path
STALE_TEMP_S = 24 * 3600  # a half-written folder older than this was left by a crash
# A venv links to the Python it was made with: another Python makes another key.
_PYTHON = [sys.version, str(Path(sys.base_prefix).resolve())]


class CacheError(RuntimeError):
    """A copy into or out of the cache failed; the setup then simply runs."""


@dataclass(frozen=True)
class CacheEntry:
    key: str
    entries: list[str]  # relative to the workspace; a folder ends with "/"
    size: int
    duration_s: float  # how long the commands took when they ran
    made_at: str


def is_lockfile(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base in LOCKFILES or bool(_REQUIREMENTS.match(base))


async def cache_key(workspace: Path, repo: str, sandbox: Sandbox) -> str:
    """The repository, the tracked lockfiles' contents (wherever they are in the tree), the
    setup and what else it runs with, and the Python the sandbox sees."""
    listed = await workspace_git(workspace, "ls-files", "-z")
    digest = hashlib.sha256()
    material = {
        "repo": repo,
        "sandbox": sandbox.model_dump(mode="json", exclude={"network"}),
        "python": _PYTHON,
    }
    digest.update(json.dumps(material, sort_keys=True).encode())
    names = sorted(n for n in listed.decode().split("\0") if n and is_lockfile(n))
    digest.update(await asyncio.to_thread(_contents, workspace, names))
    return digest.hexdigest()


def _contents(workspace: Path, names: list[str]) -> bytes:
    """Each regular file's name and hash; a link is left out, never followed."""
    parts = []
    for name in names:
        target = workspace / name
        if _real_path(workspace, name) and stat.S_ISREG(os.lstat(target).st_mode):
            parts.append(b"\0" + name.encode() + b"\0" + hashlib.sha256(target.read_bytes()).digest())
    return b"".join(parts)


async def untracked(workspace: Path) -> set[str]:
    """Every path git does not track, ignored ones too; a wholly untracked folder as one."""
    listed = await workspace_git(workspace, "ls-files", "-z", "--others", "--directory")
    return {name for name in listed.decode().split("\0") if name}


async def changed(workspace: Path) -> list[str]:
    """Tracked files that differ from what the workspace started with (its index)."""
    listed = await workspace_git(workspace, "diff", "--name-only", "--no-renames", "-z")
    return sorted(name for name in listed.decode().split("\0") if name)


def exclude(git_dir: Path, entries: list[str]) -> None:
    """What setup made stays out of every diff: it is the project's environment, not a fix."""
    patterns = ["/" + re.sub(r"([*?\[\\])", r"\\\1", entry) for entry in entries]
    target = git_dir / "info" / "exclude"
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as handle:
        handle.write("".join(f"{pattern}\n" for pattern in patterns))


def _real_path(root: Path, name: str) -> bool:
    """`name` is relative, with no `..`, and every folder above it inside `root` is a real one."""
    parts = Path(name.rstrip("/")).parts
    if not parts or Path(name).is_absolute() or ".." in parts:
        return False
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return False
        except FileNotFoundError:
            return True  # made below, by the copy
    return True


def _size(path: Path) -> int:
    mode = os.lstat(path).st_mode
    if not stat.S_ISDIR(mode):
        return os.lstat(path).st_size if stat.S_ISREG(mode) else 0
    total = 0
    for folder, _, names in os.walk(path, followlinks=False):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


async def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        "cp", "-a", "--reflink=auto", "--", str(source), str(target),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise CacheError(f"cp {source} failed: {err.decode(errors='replace').strip()[-300:]}")


async def save(
    root: Path, key: str, workspace: Path, entries: list[str], duration_s: float, budget: int
) -> str:
    """Keep `entries` of the workspace under `key`; what became of them, in words."""
    if not entries:
        return "nothing to cache: it left no untracked files"
    if not all(_real_path(workspace, entry) for entry in entries):
        return "not cached: a path it made passes through a link"
    size = sum(await asyncio.to_thread(lambda: [_size(workspace / e.rstrip("/")) for e in entries]))
    if size > budget:
        return f"not cached: {readable_bytes(size)} is more than OPENLOOP_SETUP_CACHE_MB allows"
    if (root / key).is_dir():
        return "cached already"
    temp = root / f".tmp-{uuid.uuid4().hex}"
    try:
        for entry in entries:
            name = entry.rstrip("/")
            await _copy(workspace / name, temp / "files" / name)
        made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        meta = {"workspace": str(workspace), "entries": entries, "size": size, "duration_s": duration_s}
        (temp / META).write_text(json.dumps(meta | {"made_at": made}))
        (temp / USED).touch()
        os.rename(temp, root / key)  # a folder already there (another workspace's) wins
    except (OSError, CacheError) as error:
        shutil.rmtree(temp, ignore_errors=True)
        return "cached already" if (root / key).is_dir() else f"not cached: {error}"
    await asyncio.to_thread(evict, root, budget)
    return f"cached ({readable_bytes(size)})"


async def restore(root: Path, key: str, workspace: Path) -> CacheEntry | None:
    """Copy what the cache holds for `key` into the workspace; None when it holds nothing
    usable (then nothing is left half-copied)."""
    folder = root / key
    try:
        meta = json.loads((folder / META).read_text())
        entries, old = [str(entry) for entry in meta["entries"]], str(meta["workspace"])
        found = CacheEntry(key, entries, int(meta["size"]), float(meta["duration_s"]), str(meta["made_at"]))
        (folder / USED).touch()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    targets = [workspace / entry.rstrip("/") for entry in entries]
    if not await asyncio.to_thread(_restorable, workspace, entries):
        return None
    copied: list[Path] = []
    try:
        for entry, target in zip(entries, targets, strict=True):
            copied.append(target)
            await _copy(folder / "files" / entry.rstrip("/"), target)
        await asyncio.to_thread(relocate, targets, old, str(workspace))
    except (OSError, CacheError):
        for target in copied:
            await asyncio.to_thread(_remove, target)
        return None
    return found


def _restorable(workspace: Path, entries: list[str]) -> bool:
    """Each entry lands in real folders, where nothing is yet (the tree may differ from the one
    the setup ran in)."""
    free = [not os.path.lexists(workspace / entry.rstrip("/")) for entry in entries]
    return all(free) and all(_real_path(workspace, entry) for entry in entries)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        path.unlink()


def relocate(paths: list[Path], old: str, new: str) -> None:
    """Rewrite `old` (a whole path, not the start of a longer name) to `new` in text files and
    link targets under `paths`."""
    if old == new:
        return
    pattern = re.compile(re.escape(old.encode()) + rb"(?![A-Za-z0-9._-])")
    for top in paths:
        if top.is_dir() and not top.is_symlink():
            walked = os.walk(top, followlinks=False)
            names = [os.path.join(folder, n) for folder, folders, files in walked for n in files + folders]
        else:
            names = [str(top)]
        for name in names:
            _relocate_one(name, pattern, new.encode())


def _relocate_one(name: str, pattern: re.Pattern[bytes], new: bytes) -> None:
    info = os.lstat(name)
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(name)
        moved = pattern.sub(new, target.encode())
        if moved != target.encode():
            os.unlink(name)
            os.symlink(moved.decode(), name)
        return
    if not stat.S_ISREG(info.st_mode) or info.st_size > RELOCATE_MAX_BYTES:
        return
    fd = os.open(name, os.O_RDWR | os.O_NOFOLLOW)
    with os.fdopen(fd, "r+b") as handle:
        data = handle.read()
        if pattern.search(data) is None:
            return
        if b"\0" in data:
            if name.endswith(".pyc"):
                os.unlink(name)  # names its old source; Python compiles it again
            return
        handle.seek(0)
        handle.write(pattern.sub(new, data))
        handle.truncate()


def evict(root: Path, budget: int) -> None:
    """Remove the least recently used folders until the rest fit in `budget` bytes, and what
    a crash left half-written."""
    kept: list[tuple[float, int, Path]] = []
    for folder in root.iterdir() if root.is_dir() else []:
        if folder.name.startswith("."):
            if time.time() - folder.stat().st_mtime > STALE_TEMP_S:
                shutil.rmtree(folder, ignore_errors=True)
            continue
        try:
            size = int(json.loads((folder / META).read_text())["size"])
            kept.append(((folder / USED).stat().st_mtime, size, folder))
        except (OSError, ValueError, KeyError):
            continue
    total = sum(size for _, size, _ in kept)
    for _, size, folder in sorted(kept):
        if total <= budget:
            break
        gone = root / f".evicted-{uuid.uuid4().hex}"
        try:
            os.rename(folder, gone)  # a restore under way fails whole, never half
        except OSError:
            continue
        shutil.rmtree(gone, ignore_errors=True)
        total -= size
