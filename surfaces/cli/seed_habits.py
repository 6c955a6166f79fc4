"""The thu-nmrc loop toolkit's commands (`openloop init|run|doctor|status WORKSPACE`) typed
here: each says in one line which `openloop loops ...` command does it and exits 2, except
`doctor WORKSPACE`, which only reads and so runs `openloop loops doctor` on the workspace.

Our own `openloop doctor` and `openloop status` take no argument, so an argument marks the
toolkit's habit; `init` and `run` are not ours at the top level at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.main import get_command

from surfaces.cli.errors import OpenLoopGroup

EXIT_USAGE = 2
_HINTS = {
    "init": (
        "`openloop init` is `openloop loops init FOLDER` here (a starter loop.yaml and demo project); "
        "an existing openloop.json needs no init: `openloop loops doctor {workspace}`"
    ),
    "run": (
        "`openloop run` is `openloop loops run {workspace}` here (it reads the workspace's "
        "openloop.json; its total_rounds caps the rounds)"
    ),
    "status": (
        "`openloop status WORKSPACE` is `openloop loops status LOOP_ID` here: a loop is followed "
        "by the id `openloop loops run` prints (`openloop loops list` lists them)"
    ),
}


def _workspace(args: list[str] | None) -> str:
    words = [arg for arg in args or [] if not arg.startswith("-")]
    return words[0] if words else "WORKSPACE"


# Every word after the command is taken as is: the toolkit's options are not ours.
_ANY_ARGS = {"ignore_unknown_options": True, "allow_extra_args": True}
_ARGS = typer.Argument(None, hidden=True)
habits = typer.Typer(add_completion=False)


def _say(name: str, args: list[str] | None) -> None:
    typer.echo(_HINTS[name].format(workspace=_workspace(args)), err=True)
    raise typer.Exit(EXIT_USAGE)


@habits.command("init", context_settings=_ANY_ARGS, hidden=True)
def _init(args: list[str] | None = _ARGS) -> None:
    _say("init", args)


@habits.command("run", context_settings=_ANY_ARGS, hidden=True)
def _run(args: list[str] | None = _ARGS) -> None:
    _say("run", args)


@habits.command("status", context_settings=_ANY_ARGS, hidden=True)
def _status(args: list[str] | None = _ARGS) -> None:
    _say("status", args)


@habits.command("doctor", context_settings=_ANY_ARGS, hidden=True)
def _doctor(args: list[str] | None = _ARGS) -> None:
    from surfaces.cli.loops import doctor

    workspace = _workspace(args)
    typer.echo(f"(`openloop doctor {workspace}` is `openloop loops doctor {workspace}` here)", err=True)
    doctor(Path(workspace))


def habit_name(args: list[str], known: set[str]) -> str | None:
    """The toolkit command `args` start with, when they are not one of ours."""
    if not args:
        return None
    name, has_argument = args[0], len(args) > 1 and not args[1].startswith("-")
    if name in ("init", "run") and name not in known:
        return name
    if name in ("doctor", "status") and has_argument:
        return name
    return None


class HabitGroup(OpenLoopGroup):
    """The root group, knowing the toolkit's habits (above)."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = habit_name(args, set(self.commands))
        if name is not None:
            command = get_command(habits).commands[name]  # type: ignore[attr-defined]
            return name, command, args[1:]
        return super().resolve_command(ctx, args)
