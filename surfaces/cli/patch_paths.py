"""A loop's patch named from the top of the repository its project lives in.

A loop's diff names files from the project's own root (`calc.py`). When the project is a
folder inside another git repository (`loops init` in a clone writes `demo-project/` there),
`git -C demo-project apply` reads those names from the top of that repository, finds
`calc.py` outside the folder it runs in, skips it and exits 0 having changed nothing. So
`openloop loops diff` names the files as `git diff` would in that repository
(`demo-project/calc.py`): the patch then applies with `git -C demo-project apply` and with
`git apply` at the repository's top. A project that is a repository of its own, or in none,
keeps its names. Only the header lines of each file's diff are rewritten; a path git would
quote (or that has a space) is written quoted.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

_PLAIN = re.compile(rb"^[A-Za-z0-9._@+=,%~:/-]*$")
_ESCAPES = {
    7: b"\\a",
    8: b"\\b",
    9: b"\\t",
    10: b"\\n",
    11: b"\\v",
    12: b"\\f",
    13: b"\\r",
    34: b'\\"',
    92: b"\\\\",
}
_NAMED = (b"rename from ", b"rename to ", b"copy from ", b"copy to ")


def repository_prefix(folder: str | None) -> str:
    """`sub/dir/` when `folder` is a folder below the top of a git work tree on this machine;
    "" when it is the top of one, in none, or not here."""
    if not folder or not Path(folder).is_dir():
        return ""
    try:
        found = subprocess.run(
            ["git", "-C", folder, "rev-parse", "--show-prefix"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return found.stdout.strip() if found.returncode == 0 else ""


def prefix_paths(patch: bytes, prefix: str) -> bytes:
    """`patch` (git's format, binary parts included) with every file named `prefix` + name."""
    if not prefix:
        return patch
    into = prefix.encode()
    lines = patch.split(b"\n")
    header = False
    for number, line in enumerate(lines):
        if line.startswith(b"diff --git "):
            header = True
            lines[number] = b"diff --git " + _both(line[len(b"diff --git ") :], into)
        elif not header:
            continue
        elif line.startswith((b"@@", b"GIT binary patch", b"Binary files ")):
            header = False
        elif line.startswith((b"--- ", b"+++ ")):
            lines[number] = line[:4] + _side(line[4:], into)
        else:
            for named in _NAMED:
                if line.startswith(named):
                    lines[number] = named + _path(line[len(named) :], b"", into)
    return b"\n".join(lines)


def _both(rest: bytes, into: bytes) -> bytes:
    """`a/X b/Y` (either quoted) with both names prefixed."""
    if rest.startswith(b'"'):
        end = _closing_quote(rest)
        first, second = rest[: end + 1], rest[end + 2 :]
    else:
        split = _split_unquoted(rest)
        first, second = rest[:split], rest[split + 1 :]
    return _path(first, b"a/", into) + b" " + _path(second, b"b/", into)


def _split_unquoted(rest: bytes) -> int:
    """Where `a/X b/Y` splits: in the middle when both names are the same (they may hold
    spaces), else before a quoted second name or the first ` b/`."""
    middle = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[middle : middle + 4] == b" b/" and rest[2:middle] == rest[middle + 3 :]:
        return middle
    quoted = rest.find(b' "b/')
    return quoted if quoted != -1 else rest.find(b" b/")


def _side(name: bytes, into: bytes) -> bytes:
    """The name on a `---`/`+++` line; /dev/null stays, a trailing tab part is kept."""
    if name == b"/dev/null":
        return name
    if name.startswith(b'"'):
        end = _closing_quote(name)
        return _path(name[: end + 1], name[1:3], into) + name[end + 1 :]
    path, tab, tail = name.partition(b"\t")
    return _path(path, path[:2], into) + tab + tail


def _path(token: bytes, side: bytes, into: bytes) -> bytes:
    """`token` (`side` + name, quoted or not) with `into` before the name."""
    if token.startswith(b'"'):
        inner = token[1:-1]
        return b'"' + inner[: len(side)] + _quote(into) + inner[len(side) :] + b'"'
    name = token[len(side) :]
    if _PLAIN.match(into):
        return side + into + name
    return b'"' + side + _quote(into + name) + b'"'


def _quote(raw: bytes) -> bytes:
    """C-style escapes, as git quotes a path."""
    out = bytearray()
    for byte in raw:
        if byte in _ESCAPES:
            out += _ESCAPES[byte]
        elif byte < 0x20 or byte >= 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out)


def _closing_quote(text: bytes) -> int:
    """The index of the quote closing the one `text` starts with."""
    index = 1
    while index < len(text):
        if text[index] == 0x5C:  # a backslash escapes the next byte
            index += 2
            continue
        if text[index] == 0x22:
            return index
        index += 1
    return len(text) - 1
