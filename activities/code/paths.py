"""Where a path a model gives may lead: only inside the task's workspace, never into `.git`.

A coding tool's path comes from a model, which reads untrusted text (issues, files, command
output), so it is checked before anything is opened: no absolute paths, no `..` that climbs
out of the workspace, no symbolic link (on the way or at the end) whose target lies outside,
and nothing in git's own folder, where a hook or a config entry would run code on the worker.
`..` is resolved on the words of the path, never by the filesystem, so `link/..` cannot
climb out through a link either.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from activities.tool_errors import ToolError, ToolErrorKind

_RELATIVE_HINT = "give a path relative to the repository root"


def _is_git_folder(parts: tuple[str, ...]) -> bool:
    # Case-insensitively: on a case-insensitive filesystem `.GIT/config` is the same file.
    return any(part.lower() == ".git" for part in parts)


def resolve_path(root: Path, given: str) -> Path:
    """The workspace path `given` names (relative to `root`), or ToolError(ToolErrorKind.PERMISSION) that
    says what was refused and why. "" and "." name the root. The path returned is not
    resolved: a caller can still tell whether its last part is a symbolic link."""
    if "\0" in given:
        raise ToolError(ToolErrorKind.INVALID, f"{given!r} contains a NUL character; {_RELATIVE_HINT}")
    if PurePosixPath(given).is_absolute():
        raise ToolError(ToolErrorKind.PERMISSION, f"{given!r} is an absolute path; {_RELATIVE_HINT}")
    parts: list[str] = []
    for part in PurePosixPath(given).parts:
        if part == "..":
            if not parts:
                raise ToolError(
                    ToolErrorKind.PERMISSION, f"{given!r} leads outside the workspace; {_RELATIVE_HINT}"
                )
            parts.pop()
        elif part != ".":
            parts.append(part)
    if _is_git_folder(tuple(parts)):
        raise ToolError(
            ToolErrorKind.PERMISSION,
            f"{given!r} is inside .git, git's own folder, which the coding tools neither read nor "
            "write; use code.diff to see what changed",
        )
    real_root = root.resolve()
    path = root.joinpath(*parts)
    for depth in range(1, len(parts) + 1):
        step = root.joinpath(*parts[:depth])
        if not step.is_symlink():
            continue
        target = Path(os.path.realpath(step))
        shown = "/".join(parts[:depth])
        if not target.is_relative_to(real_root):
            raise ToolError(
                ToolErrorKind.PERMISSION,
                f"{given!r} goes through {shown!r}, a symbolic link to a place outside the workspace; "
                "the coding tools stay inside the repository",
            )
        if _is_git_folder(target.relative_to(real_root).parts):
            raise ToolError(
                ToolErrorKind.PERMISSION,
                f"{given!r} goes through {shown!r}, a symbolic link into .git, git's own folder",
            )
    return path


def relative_name(root: Path, path: Path) -> str:
    """How a path inside the workspace is shown to the model: relative, with forward slashes."""
    return path.relative_to(root).as_posix() or "."
