"""`openloop`: the command line, a thin layer over the packages.

Each command group lives in its own module with a `register(app)`; this file only wires
them together.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer
from typer.core import TyperOption

from surfaces.cli.errors import quiet_clients, serves
from surfaces.cli.seed_habits import HabitGroup

_option_type = TyperOption.display_type_rich


def _flag_type(self: TyperOption, ctx: typer.Context) -> str | None:
    """A flag takes no value, so its help shows no type (typer's rich help shows `<bool>`
    for every flag, `--help` included; its plain help already leaves it out)."""
    return None if self.is_flag else _option_type(self, ctx)


TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign,assignment]

app = typer.Typer(
    cls=HabitGroup,  # every command's escaped error: one line and an exit code; the toolkit's habits
    name="openloop",
    help="OpenLoop: durable team AI agents on Temporal.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

COMMAND_MODULES = (
    "surfaces.cli.stack",
    "surfaces.cli.agents",
    "surfaces.cli.worker",
    "surfaces.cli.tasks",
    "surfaces.cli.memory",
    "surfaces.cli.usage",
    "surfaces.cli.observe",
    "surfaces.cli.task_export",  # export: joins the tasks group
    "surfaces.cli.task_diff",
    "surfaces.cli.mcp",
    "surfaces.cli.skills",
    "surfaces.cli.loops",
    "surfaces.cli.dashboard",
    "surfaces.cli.hooks",
    "surfaces.cli.playbooks",
    "surfaces.cli.playbook_runs",  # apply, runs, show, schedule: joins the playbooks group
    "surfaces.cli.playbook_fire",  # fire: joins the playbooks group
    "surfaces.cli.doctor",
    "surfaces.cli.eval",
    "surfaces.slack.cli",
    "surfaces.discord.cli",
)

for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(_name)
    except ModuleNotFoundError as _exc:
        if _exc.name is not None and _name.startswith(_exc.name):
            continue
        raise
    _module.register(app)


# Commands that only talk to Temporal as a client and then end. The client's native threads
# can outlive the event loop and abort the interpreter while it finalizes ("PyGILState_Release:
# thread state must be current", temporalio/sdk-python#300), turning a finished command
# into exit code -6; these end without that teardown, their output flushed first. Commands
# that own processes or servers (`up`, `worker`, `serve`) exit normally, cleanups and all.
CLIENT_COMMANDS = {
    "ask",
    "approve",
    "deny",
    "reply",
    "cancel",
    "extend",
    "explain",
    "tasks",
    "status",
    "loops",
    "promote",
    "playbooks",
    "eval",
}


def main() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    if not serves(sys.argv[1:]):
        quiet_clients()
    if len(sys.argv) < 2 or sys.argv[1] not in CLIENT_COMMANDS:
        app()
        return
    try:
        app()
        code: object = 0
    except SystemExit as ended:
        code = ended.code
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


if __name__ == "__main__":
    main()
