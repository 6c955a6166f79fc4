"""A loop command's `{placeholders}`: which exist, where they may stand, and filling them in.

A loop file's commands are shell lines such as `python fix.py {last_error}`. Each known
placeholder is replaced by its value shell-quoted, so a value is always one literal argument:
`{last_error}` is the previous command's output, written by whatever the project printed, and
must never become shell syntax. Quoting only holds where the shell reads the value as a bare
word, so `{last_error}` inside quotes, `${...}` or after a here-document is refused.

The other placeholders are OpenLoop's own values (the workspace path, the round number), so
they may also stand inside '...' or "..." as other loop tools write them (`--task 'Fix the
latest failure in {workspace}'`): a value made only of characters that mean nothing to the
shell goes in as is, any other through its `OPENLOOP_*` variable, which the shell expands
once and never re-reads.

Pure string work with no I/O: the loop workflow renders commands inside Temporal's sandbox.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

__all__ = [
    "PLACEHOLDERS",
    "TRUSTED",
    "misplaced_placeholders",
    "render_command",
    "step_environment",
    "unknown_placeholders",
]

PLACEHOLDERS = ("workspace", "project_root", "round", "last_error")

# `{name}` with an identifier inside. `${VAR}` is the shell's; `{a,b}` and `{}` are not names.
_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")

# Where the shell reads a `'quoted'` value as one literal word: at the top level, in a
# `$(...)`/backtick command or a `(...)` subshell. Inside quotes, `${...}` or a here-document
# body the single quotes would be kept as text or the value expanded.
_SAFE_CONTEXTS = frozenset({"top", "command", "backtick", "subshell"})
_QUOTED = frozenset({"single", "double"})
# OpenLoop's own values, never written by the project: safe inside quotes (see above).
TRUSTED = {
    "workspace": "OPENLOOP_WORKSPACE",
    "project_root": "OPENLOOP_PROJECT_ROOT",
    "round": "OPENLOOP_ROUND",
}
# What `shlex.quote` leaves unquoted: literal inside single and double quotes alike.
_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./-]*$")


def _contexts(command: str) -> list[tuple[int, str]]:
    """(offset, context) of every `{` in `command` that could start a placeholder.

    A small reading of POSIX shell quoting: enough to tell a bare word from a quoted one.
    Anything it does not follow (here-documents) makes every later position unsafe.
    """
    found: list[tuple[int, str]] = []
    stack = ["top"]
    index = 0
    while index < len(command):
        char, context = command[index], stack[-1]
        pair = command[index : index + 2]
        if char == "{":
            found.append((index, context))
        if context == "heredoc":
            pass  # stays to the end: the body's lines are expanded by the shell
        elif context == "single":
            if char == "'":
                stack.pop()
        elif char == "\\":
            index += 1  # the next character is literal
        elif pair in ("$(", "${"):
            stack.append("command" if pair == "$(" else "parameter")
            index += 1
        elif char == "`":
            if context == "backtick":
                stack.pop()
            else:
                stack.append("backtick")
        elif context == "double":
            if char == '"':
                stack.pop()
        elif context == "parameter" and char == "}":
            stack.pop()
        elif char == '"':
            stack.append("double")
        elif char == "'":
            stack.append("single")
        elif char == "#" and (index == 0 or command[index - 1].isspace()):
            # A comment runs to the end of the line; its `don't` opens no quote.
            end = command.find("\n", index)
            index = len(command) if end < 0 else end
            continue
        elif char == "(":
            stack.append("subshell")
        elif char == ")" and context in ("command", "subshell"):
            stack.pop()
        elif pair == "<<":
            stack.append("heredoc")
        index += 1
    return found


def unknown_placeholders(command: str) -> list[str]:
    """Names in a bare `{name}` that are not placeholders, each once, in order: a typo.

    Inside quotes `{name}` is the text of an awk program or a Python f-string, not ours.
    """
    context_at = dict(_contexts(command))
    names = [
        match.group(1)
        for match in _PLACEHOLDER.finditer(command)
        if match.group(1) not in PLACEHOLDERS and context_at.get(match.start()) in _SAFE_CONTEXTS
    ]
    return list(dict.fromkeys(names))


def _fits(name: str, context: str | None) -> bool:
    return context in _SAFE_CONTEXTS or (name in TRUSTED and context in _QUOTED)


def misplaced_placeholders(command: str) -> list[str]:
    """Known placeholders standing where their value would not stay literal (`{last_error}`
    inside quotes; any inside `${...}` or a here-document): each once, in order."""
    context_at = dict(_contexts(command))
    names = [
        match.group(1)
        for match in _PLACEHOLDER.finditer(command)
        if match.group(1) in PLACEHOLDERS and not _fits(match.group(1), context_at.get(match.start()))
    ]
    return list(dict.fromkeys(names))


def _in_quotes(name: str, value: str, context: str) -> str:
    """A trusted value inside quotes: as is when plain, else its variable, expanded once."""
    if _PLAIN.match(value):
        return value
    variable = "${" + TRUSTED[name] + "}"
    return variable if context == "double" else f"'\"{variable}\"'"


def render_command(command: str, values: Mapping[str, str]) -> str:
    """`command` with each known placeholder replaced by its value, shell-quoted (inside
    quotes, a trusted value as `_in_quotes` puts it; the command must run with
    `step_environment`'s variables).

    Unknown `{names}` are left as written (the loop file reader refuses them). Raises
    ValueError for a placeholder with no value or one that cannot be filled in safely.
    """
    misplaced = misplaced_placeholders(command)
    if misplaced:
        names = ", ".join(f"{{{name}}}" for name in misplaced)
        raise ValueError(f"{names} inside quotes cannot be filled in safely; write it bare")
    context_at = dict(_contexts(command))

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in PLACEHOLDERS:
            return match.group(0)
        if name not in values:
            raise ValueError(f"no value for {{{name}}}")
        context = context_at.get(match.start())
        if context in _QUOTED:
            return _in_quotes(name, values[name], context)
        return shlex.quote(values[name])

    return _PLACEHOLDER.sub(fill, command)


def step_environment(workspace: str, project_root: str, round: int, step: str) -> dict[str, str]:
    """The variables every loop command sees, for scripts that would rather read them."""
    return {
        "OPENLOOP_WORKSPACE": workspace,
        "OPENLOOP_PROJECT_ROOT": project_root,
        "OPENLOOP_ROUND": str(round),
        "OPENLOOP_STEP": str(step),
    }
