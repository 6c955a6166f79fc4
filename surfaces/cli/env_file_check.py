"""The doctors' check of a sandbox's `env_file` (`openloop loops doctor`, `openloop doctor`):
the file exists here, can be read and parses, with the keys named and the surprises called
out. Only key names and line numbers are ever printed, never a value."""

from __future__ import annotations

from activities.loops.env_file import EnvFileError, read_env_file

# What the sandbox sets itself: a key of the same name replaces it (`bwrap.command_env`).
_SANDBOX_OWN = ("PATH", "HOME", "LANG")
# What every loop command is given for its step: a key of the same name is ignored.
_STEP_PREFIX = "OPENLOOP_"


def env_file_check(path: str, env_from: list[str]) -> tuple[bool, str]:
    """(ok, what to tell) for the env file at `path`; a key with no value is a problem, since a
    secret left blank is the usual mistake, and shadowing is worth a note, not a failure."""
    try:
        env = read_env_file(path, here="here (the loop worker reads it as each command starts)")
    except EnvFileError as error:
        return False, str(error)
    keys = list(env.values)
    if not keys:
        return False, f"{path} sets no variables: add KEY=value lines, or remove env_file"
    empty = [f"{key} (line {env.lines[key]})" for key in keys if env.values[key] == ""]
    if empty:
        return False, f"{path}: no value for {', '.join(empty)}: fill it in, or remove the line"
    notes = []
    if own := [key for key in keys if key in _SANDBOX_OWN]:
        notes.append(f"{', '.join(own)} replace(s) the sandbox's own (commands may not find their tools)")
    if ignored := [key for key in keys if key.startswith(_STEP_PREFIX)]:
        notes.append(f"{', '.join(ignored)} ignored: each command's step sets it")
    if both := [key for key in keys if key in env_from]:
        notes.append(f"{', '.join(both)} also in env_from: the worker's value wins")
    detail = f"{path}: {len(keys)} key(s): {', '.join(keys)}"
    return True, "; ".join([detail, *notes])
