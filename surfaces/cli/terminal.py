"""How the CLI talks back: the command name the user typed, and output a script can read.

Hints name commands the way the user runs them (`.venv/bin/openloop approve …` when that is
what they typed), and output that is not a terminal is never wrapped at 80 columns, so a
link or a command in a log or a pipe stays whole.
"""

from __future__ import annotations

import os
import re
import shutil
import sys

from rich.console import Console

NAME = "openloop"
# `openloop` followed by a subcommand, not part of a longer word or a path.
_COMMAND = re.compile(r"(?<![\w./-])openloop(?= [a-z])")


def program(argv0: str | None = None) -> str:
    """How to name this CLI in a hint: the path the user typed, or `openloop` when that is
    what runs it (on PATH, or started some other way, e.g. `python -m`)."""
    given = sys.argv[0] if argv0 is None else argv0
    if os.path.basename(given) != NAME or os.sep not in given:
        return NAME
    on_path = shutil.which(NAME)
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(given):
        return NAME
    return given


def commands(text: str, argv0: str | None = None) -> str:
    """`text` with each `openloop SUBCOMMAND` named the way the user runs the CLI."""
    name = program(argv0)
    return text if name == NAME else _COMMAND.sub(lambda _: name, text)


def make_console(*, stderr: bool = False) -> Console:
    """A console that wraps for a person at a terminal and never for a pipe or a file."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(emoji=False, stderr=stderr, highlight=False, soft_wrap=not stream.isatty())
