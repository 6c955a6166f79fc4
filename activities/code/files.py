"""The coding tools' file operations: list, read, search, edit and write files in a workspace.

Plain filesystem work, bounded so that no answer floods the model's context: every path
goes through `resolve_path` first (inside the workspace, never `.git`), binary files are
refused or skipped, and every list says how much it left out and how to see the rest.
Blocking; the tool handlers call these in a thread.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from activities.code.paths import relative_name, resolve_path
from activities.tool_errors import ToolError, ToolErrorKind

MAX_LISTED = 500
MAX_READ_LINES = 400
MAX_READ_CHARS = 40_000
MAX_LINE_CHARS = 2_000  # of one line shown by read_file
MAX_MATCHES = 200
MAX_MATCH_CHARS = 300  # of one matching line shown by search
MAX_SEARCHED_BYTES = 2 << 20  # a bigger file is not searched
EDIT_EXCERPT_LINES = 30
# Never listed or searched: git's own folder, and what tools leave behind (never part of a fix).
SKIPPED_FOLDERS = frozenset(
    {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules"}
)
_BINARY_PROBE = 8192


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over '/'-separated relative paths: `*`, `?` and `[...]` stay within
    one folder, a `**` segment spans any number of them (none included)."""
    segments = pattern.removeprefix("./").split("/")
    out = ""
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out += ".*" if last else "(?:.*/)?"
            continue
        position = 0
        while position < len(segment):
            char = segment[position]
            close = segment.find("]", position + 2) if char == "[" else -1
            if char == "*":
                out += "[^/]*"
            elif char == "?":
                out += "[^/]"
            elif close > 0:
                inner = segment[position + 1 : close]
                out += "[" + ("^" + inner[1:] if inner.startswith("!") else inner).replace("\\", "\\\\") + "]"
                position = close
            else:
                out += re.escape(char)
            position += 1
        out += "" if last else "/"
    try:
        return re.compile(out)
    except re.error as exc:
        raise ToolError(
            ToolErrorKind.INVALID, f"{pattern!r} is not a glob this tool understands: {exc}"
        ) from None


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    """Every file and symbolic link under `root` (links are not followed), skipped folders left out."""
    for folder, folders, names in os.walk(root, followlinks=False):
        base = Path(folder)
        folders[:] = [name for name in folders if name.lower() not in SKIPPED_FOLDERS]
        links = [name for name in folders if (base / name).is_symlink()]
        for name in [*names, *links]:
            yield relative_name(root, base / name), base / name


def _is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\0" in handle.read(_BINARY_PROBE)


def list_files(root: Path, glob: str = "**/*") -> str:
    matcher = _glob_regex(glob)
    found = sorted(name for name, _ in _walk(root) if matcher.fullmatch(name))
    if not found:
        return f"No files match {glob!r}."
    lines = []
    for name in found[:MAX_LISTED]:
        path = root / name
        lines.append(f"{name} -> {os.readlink(path)}" if path.is_symlink() else name)
    if len(found) > MAX_LISTED:
        lines.append(f"[… and {len(found) - MAX_LISTED} more; give a narrower glob, e.g. 'src/**/*.py']")
    return "\n".join(lines)


def _text_file(root: Path, given: str) -> Path:
    path = resolve_path(root, given)
    if path.is_dir():
        raise ToolError(
            ToolErrorKind.INVALID, f"{given!r} is a folder; list it with code.list_files and glob '{given}/*'"
        )
    if not path.is_file():
        raise ToolError(
            ToolErrorKind.NOT_FOUND, f"no file {given!r}; find files with code.list_files or code.search"
        )
    if _is_binary(path):
        raise ToolError(
            ToolErrorKind.INVALID, f"{given!r} is a binary file; the coding tools read and edit text only"
        )
    return path


def read_file(root: Path, given: str, start_line: int | None = None, end_line: int | None = None) -> str:
    """Numbered lines `start_line`..`end_line` (1-based, both included), cut to the bounds."""
    path = _text_file(root, given)
    start = start_line or 1
    if end_line is not None and end_line < start:
        raise ToolError(ToolErrorKind.INVALID, f"end_line {end_line} is before start_line {start}")
    shown: list[str] = []
    size = total = 0
    cut_at: int | None = None  # the first line not shown for lack of room
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        for total, line in enumerate(handle, 1):
            if total < start or (end_line is not None and total > end_line) or cut_at is not None:
                continue
            text = line.rstrip("\r\n")
            if len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + f" [… {len(text) - MAX_LINE_CHARS} more characters]"
            entry = f"{total:>6}  {text}"
            if len(shown) >= MAX_READ_LINES or size + len(entry) + 1 > MAX_READ_CHARS:
                cut_at = total
                continue
            shown.append(entry)
            size += len(entry) + 1
    name = relative_name(root, path)
    if total == 0:
        return f"{name} is empty."
    if start > total:
        raise ToolError(
            ToolErrorKind.INVALID, f"{name} has {total} lines; start_line {start} is past its end"
        )
    last = start + len(shown) - 1
    header = f"{name}, lines {start}-{last} of {total}:"
    if cut_at is None:
        return "\n".join([header, *shown])
    footer = f"[cut at line {cut_at - 1}: read on with start_line={cut_at}]"
    return "\n".join([header, *shown, footer])


def search(root: Path, pattern: str, glob: str | None = None) -> str:
    """Lines matching a Python regular expression, as `path:line: text`."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(
            ToolErrorKind.INVALID, f"{pattern!r} is not a valid (Python) regular expression: {exc}"
        ) from None
    matcher = _glob_regex(glob) if glob else None
    matches: list[str] = []
    searched = too_big = 0
    more = False
    for name, path in sorted(_walk(root)):
        if path.is_symlink() or (matcher is not None and not matcher.fullmatch(name)):
            continue
        try:
            if path.stat().st_size > MAX_SEARCHED_BYTES:
                too_big += 1
                continue
            data = path.read_bytes() if path.is_file() else b"\0"  # not a pipe or a device
        except OSError:  # gone since the walk, or unreadable
            continue
        if b"\0" in data[:_BINARY_PROBE]:
            continue
        searched += 1
        for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
            if regex.search(line):
                if len(matches) == MAX_MATCHES:
                    more = True
                    break
                matches.append(f"{name}:{number}: {line.strip()[:MAX_MATCH_CHARS]}")
        if more:
            break
    notes = [f"[{too_big} file(s) over {MAX_SEARCHED_BYTES >> 20} MB not searched]"] if too_big else []
    if not matches:
        where = f" (files matching {glob!r})" if glob else ""
        return "\n".join([f"No line matches {pattern!r} in {searched} text files{where}.", *notes])
    if more:
        notes.append(f"[only the first {MAX_MATCHES} matches are shown; narrow the pattern or give a glob]")
    return "\n".join(matches + notes)


def _writable(root: Path, given: str) -> Path:
    path = resolve_path(root, given)
    if path.is_symlink():
        raise ToolError(
            ToolErrorKind.PERMISSION,
            f"{given!r} is a symbolic link; write the file it points to by its own path",
        )
    # A folder with a repository of its own (one of `sandbox.repos`) is never in the diff.
    for folder in list(path.relative_to(root).parents)[:-1]:
        if (root / folder / ".git").exists():
            raise ToolError(
                ToolErrorKind.PERMISSION,
                f"{given!r} is inside {folder.as_posix()}, a repository of its own (read-only): "
                "a change there would never reach the diff",
            )
    return path


def _occurrences(text: str, snippet: str) -> list[int]:
    found, at = [], text.find(snippet)
    while at >= 0:
        found.append(at)
        at = text.find(snippet, at + 1)
    return found


def edit_file(root: Path, given: str, old: str, new: str) -> str:
    """Replace `old`, which must occur exactly once, with `new`."""
    _writable(root, given)
    path = _text_file(root, given)
    try:
        text = path.read_bytes().decode()
    except UnicodeDecodeError:
        raise ToolError(
            ToolErrorKind.INVALID, f"{given!r} is not UTF-8 text; rewrite it whole with code.write_file"
        ) from None
    if old == new:
        raise ToolError(ToolErrorKind.INVALID, "old and new are the same text: nothing would change")
    found = _occurrences(text, old)
    if not found and "\r\n" in text and "\r\n" not in old:  # the file has Windows line ends
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        found = _occurrences(text, old)
    if not found:
        # A retried call whose first attempt wrote the file finds its own result.
        done = " (the new text is there already: was this edit made before?)" if new and new in text else ""
        raise ToolError(
            ToolErrorKind.INVALID,
            f"the text to replace does not occur in {given!r}{done}; read the file with "
            "code.read_file and copy the lines exactly, indentation included",
        )
    if len(found) > 1:
        raise ToolError(
            ToolErrorKind.INVALID,
            f"the text to replace occurs {len(found)} times in {given!r}; include more of the "
            "surrounding lines so that it occurs exactly once",
        )
    at = found[0]
    updated = text[:at] + new + text[at + len(old) :]
    path.write_bytes(updated.encode())
    first = text.count("\n", 0, at) + 1
    new_lines = updated[at : at + len(new)].count("\n") + 1
    excerpt = updated.splitlines()[first - 1 : first - 1 + min(new_lines, EDIT_EXCERPT_LINES)]
    numbered = [f"{first + offset:>6}  {line[:MAX_LINE_CHARS]}" for offset, line in enumerate(excerpt)]
    old_lines = old.count("\n") + 1
    return "\n".join(
        [f"Edited {relative_name(root, path)}: {old_lines} line(s) from line {first} are now:", *numbered]
    )


def write_file(root: Path, given: str, content: str) -> str:
    """Create or replace a whole file, with the folders it needs."""
    path = _writable(root, given)
    if path == root or path.is_dir():
        raise ToolError(ToolErrorKind.INVALID, f"{given!r} is a folder; give a file's path")
    if path.exists() and not path.is_file():
        raise ToolError(
            ToolErrorKind.INVALID,
            f"{given!r} is not a regular file (a pipe or a device); it cannot be written",
        )
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode())
    except (FileExistsError, NotADirectoryError):
        raise ToolError(
            ToolErrorKind.INVALID, f"part of {given!r} is a file, so it cannot hold a folder"
        ) from None
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    verb = "Replaced" if existed else "Created"
    return f"{verb} {relative_name(root, path)} ({lines} lines, {len(content.encode())} bytes)."
