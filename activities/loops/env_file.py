"""`sandbox.env_file`: a dotenv file on the worker whose keys join a sandboxed command's
variables, read when the command starts, and the masking of its values in what is kept of
the command's output.

Its values go only into the command's environment: never into an error message, a log line,
an activity's input or result, or a heartbeat. Errors name the file and the line, never what
the line holds. The file is read with python-dotenv's parser (quotes, `export`, comments and
multi-line values as everywhere else dotenv files are read), without its interpolation, so a
`${VAR}` is taken as written and no worker variable leaks in; a line it cannot read, a key that
is not a variable name or a key with no `=` is an error rather than a line skipped.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from dotenv.parser import parse_stream

from activities.loops.run_record import RunOutcome
from workflows.loop_types import Sandbox

__all__ = [
    "MASK",
    "MASKED_MIN_CHARS",
    "EnvFile",
    "EnvFileError",
    "load_env",
    "mask",
    "mask_bytes",
    "masked_run",
    "parse_env",
    "read_env_file",
]

MASK = "***"
# Shorter values (`1`, `true`, a port) are everywhere in ordinary output: masking them would
# garble it and hide nothing worth hiding. CI systems draw the same line.
MASKED_MIN_CHARS = 8
MAX_BYTES = 1_000_000  # a dotenv file bigger than this is a mistake, not a configuration
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EnvFileError(RuntimeError):
    """The env file cannot be used; the message names the file and line, never a value."""


@dataclass(frozen=True)
class EnvFile:
    values: dict[str, str]
    problems: list[str] = field(default_factory=list)  # "line 3: ..." each
    lines: dict[str, int] = field(default_factory=dict)  # where each key was set (last time)

    def secrets(self) -> list[str]:
        """The values worth masking in output, longest first."""
        return sorted({v for v in self.values.values() if len(v) >= MASKED_MIN_CHARS}, key=len, reverse=True)


def parse_env(text: str) -> EnvFile:
    """Every key and value in a dotenv text, and what could not be read (by line)."""
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    problems: list[str] = []
    for binding in parse_stream(io.StringIO(text)):
        line = binding.original.line
        if binding.error:
            problems.append(f"line {line}: cannot be read as KEY=value")
        elif binding.key is None:
            continue  # a comment or a blank line
        # What a bad line holds is never repeated: it may be a value pasted on its own.
        elif not _ENV_NAME.match(binding.key):
            problems.append(f"line {line}: the key is not a variable name (letters, digits and _)")
        elif binding.value is None:
            problems.append(f"line {line}: no `=`; write KEY=value, or KEY= for an empty value")
        elif "\0" in binding.value:
            problems.append(f"line {line}: the value holds a NUL character, which no variable can")
        else:
            values[binding.key] = binding.value
            lines[binding.key] = line
    return EnvFile(values, problems, lines)


def read_env_file(path: str, here: str = "on this worker") -> EnvFile:
    """The file's keys and values; EnvFileError when it is missing, unreadable or not dotenv."""
    where = Path(path)
    try:
        if not where.is_file():
            what = "is not a file" if where.exists() else "does not exist"
            raise EnvFileError(f"the sandbox's env_file {path} {what} {here}")
        if where.stat().st_size > MAX_BYTES:
            raise EnvFileError(f"the sandbox's env_file {path} is over {MAX_BYTES // 1000} KB")
        text = where.read_text(encoding="utf-8")
    except PermissionError:
        raise EnvFileError(f"the sandbox's env_file {path} cannot be read by the worker's user") from None
    except UnicodeDecodeError:
        raise EnvFileError(f"the sandbox's env_file {path} is not UTF-8 text") from None
    except OSError as error:
        raise EnvFileError(f"the sandbox's env_file {path} cannot be read: {error.strerror}") from None
    env = parse_env(text)
    if env.problems:
        raise EnvFileError(f"the sandbox's env_file {path}: {'; '.join(env.problems)}")
    return env


def mask(text: str, secrets: list[str]) -> str:
    """`text` with every occurrence of each secret (longest first) replaced by MASK."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def mask_bytes(data: bytes, secrets: list[str]) -> bytes:
    """`mask` for output as the command wrote it, before any decoding."""
    for secret in secrets:
        data = data.replace(secret.encode(), MASK.encode())
    return data


def load_env(sandbox: Sandbox) -> EnvFile:
    """The sandbox's env file as it is now (nothing when it names none); EnvFileError."""
    return read_env_file(sandbox.env_file) if sandbox.env_file else EnvFile({})


def masked_run(ended: RunOutcome, log_path: Path, secrets: list[str]) -> RunOutcome:
    """The outcome with its tail masked, and its log file (what gets stored) masked in place.

    A value the command printed is masked only whole: one the kept log starts in the middle
    of (output cut to its size) shows its end."""
    if not secrets:
        return ended
    if log_path.is_file():
        log_path.write_bytes(mask_bytes(log_path.read_bytes(), secrets))
    return replace(ended, tail=mask(ended.tail, secrets))
