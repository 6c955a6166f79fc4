"""A skill's resources: every file beside its SKILL.md, read as bytes and kept byte-exact.

Skills ship fonts, PDFs and archives as well as Markdown and scripts, so a file is bytes
first; `is_text` decides whether the model may read it as text (UTF-8 without NUL bytes),
and `describe` words a binary file for the model instead of showing it. Limits per file and
per skill keep a stray asset out of the database, with a message naming the skill, the file
and the limit. Pure: reading files, no network, no database.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import Path

from config.problems import ConfigProblem

SKILL_FILE = "SKILL.md"
MAX_FILE_BYTES = 1024 * 1024  # the largest file in Anthropic's public skills is ~240 KB
MAX_SKILL_BYTES = 8 * 1024 * 1024  # canvas-design ships 54 fonts, ~5.3 MB in all
FILE_LIMIT_ENV = "OPENLOOP_SKILL_MAX_FILE_BYTES"
SKILL_LIMIT_ENV = "OPENLOOP_SKILL_MAX_BYTES"
_LARGEST_SHOWN = 3
_COMPRESSED = {"gzip": "application/gzip", "bzip2": "application/x-bzip2", "xz": "application/x-xz"}
_TYPES = mimetypes.MimeTypes()
for _suffix, _type in (
    (".ttf", "font/ttf"),
    (".otf", "font/otf"),
    (".woff", "font/woff"),
    (".woff2", "font/woff2"),
    (".md", "text/markdown"),
):
    _TYPES.add_type(_type, _suffix)


@dataclass(frozen=True)
class SkillLimits:
    """Bytes a skill may store: per file, and for all its files together."""

    file_bytes: int = MAX_FILE_BYTES
    skill_bytes: int = MAX_SKILL_BYTES


def size_text(size: int) -> str:
    """1536 -> '1.5 KB', 123 -> '123 bytes': sizes as a person reads them."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def is_text(data: bytes) -> bool:
    """Readable by the model as text: valid UTF-8 with no NUL byte."""
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def media_type(path: str, data: bytes) -> str:
    """From the name, with Python's built-in table only (the host's mime.types differs)."""
    guessed, encoding = _TYPES.guess_type(path)
    if encoding in _COMPRESSED:
        return _COMPRESSED[encoding]
    if guessed:
        return guessed
    return "text/plain" if is_text(data) else "application/octet-stream"


def describe(path: str, data: bytes) -> str:
    """What the model sees for a file it cannot read as text: name, size and type, no bytes."""
    kind = media_type(path, data)
    what = "not UTF-8 text" if kind.startswith("text/") else "a binary file"
    return (
        f"{path} is {what} ({size_text(len(data))}, {kind}); it cannot be shown as text. "
        "Refer to it by this path when the instructions use it."
    )


def read_resources(
    name: str, folder: Path, limits: SkillLimits
) -> tuple[dict[str, bytes], list[ConfigProblem]]:
    """Every file under `folder` but its SKILL.md, by relative path; problems name the fix."""
    resources: dict[str, bytes] = {}
    problems: list[ConfigProblem] = []
    root = folder.resolve()
    for path in sorted(folder.rglob("*")):
        if path.is_dir() or (path.name == SKILL_FILE and path.parent == folder):
            continue
        real = path.resolve()
        if root not in real.parents:
            problems.append(
                ConfigProblem(
                    str(path),
                    None,
                    "",
                    f"a resource leaving the skill folder ({real}); keep resources inside it",
                )
            )
            continue
        size = real.stat().st_size
        if size > limits.file_bytes:
            problems.append(
                ConfigProblem(
                    str(path),
                    None,
                    "",
                    f"skill {name!r}: this file is {size_text(size)}, over the limit of "
                    f"{size_text(limits.file_bytes)} per file; move large assets out of the skill "
                    f"folder, or raise {FILE_LIMIT_ENV}",
                )
            )
            continue
        resources[path.relative_to(folder).as_posix()] = real.read_bytes()
    total = sum(len(data) for data in resources.values())
    if total > limits.skill_bytes:
        largest = sorted(resources, key=lambda key: -len(resources[key]))[:_LARGEST_SHOWN]
        shown = ", ".join(f"{key} ({size_text(len(resources[key]))})" for key in largest)
        problems.append(
            ConfigProblem(
                str(folder / SKILL_FILE),
                None,
                "",
                f"skill {name!r}: its {len(resources)} files hold {size_text(total)}, over the limit "
                f"of {size_text(limits.skill_bytes)} per skill (largest: {shown}); move large assets "
                f"out of the skill folder, or raise {SKILL_LIMIT_ENV}",
            )
        )
    return resources, problems
