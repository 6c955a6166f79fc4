"""How every `openloop` command fails: one line on stderr that says what to do, and an exit code.

The root command group (`OpenLoopGroup`) runs each command and turns what escapes it into
that line: a Temporal call on an id that names nothing (NOT_FOUND), an empty id, a task that
has already finished, Temporal or the database down (refused, dropped mid-way, a pool that
never connects). Commands raise; they do not catch these one by one. Anything else is a bug
and still ends in one line, naming the exception; `OPENLOOP_DEBUG=1` shows its traceback.
The commands that run servers (`up`, `worker`, `serve`, `slack socket`) keep their traceback
for an unknown error: their logs are where it is read.

Exit codes: 1 not found, finished or failed; 2 unreachable, or bad input.
"""

from __future__ import annotations

import os
import re
from typing import Any

import typer
from rich.markup import escape
from temporalio.client import WorkflowQueryFailedError, WorkflowQueryRejectedError, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode
from typer.core import TyperGroup

from surfaces.cli.terminal import commands, make_console
from surfaces.task_lookup import TaskNotFound

EXIT_FAILED = 1
EXIT_UNAVAILABLE = 2
DEBUG_ENV = "OPENLOOP_DEBUG"
# Commands that serve until stopped: an unknown error keeps its traceback for their logs.
SERVER_COMMANDS = {("up",), ("worker",), ("serve",), ("slack", "socket")}

_FINISHED = "workflow execution already completed"
_NO_ID = "WorkflowId is not set"
_NOT_FOUND_ID = re.compile(r"not found for ID: (\S+)")
# The Temporal client's connection error, a Rust struct dump: kept as its gist.
_CONNECT_DETAIL = re.compile(r"\s*\((?:Failed client connect|Server connection error)[^\n]*", re.S)


class CliError(Exception):
    """A command's failure, said in one line, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


def one_line(text: str) -> str:
    """`text` on one line: a connection error's struct dump cut down to its gist."""
    gist = _connection_gist(text)
    if gist is not None:
        text = _CONNECT_DETAIL.sub(f" ({gist})", text, count=1)
    return " ".join(text.split())


def _connection_gist(text: str) -> str | None:
    lowered = text.lower()
    if "failed client connect" not in lowered and "tcp connect error" not in lowered:
        return None
    for needle, gist in (
        ("connection refused", "connection refused"),
        ("dns error", "unknown host"),
        ("timed out", "timed out"),
        ("connection reset", "connection reset"),
    ):
        if needle in lowered:
            return gist
    return "cannot connect"


def say(message: str) -> None:
    """`error: message` on stderr, on one line whatever the terminal's width."""
    make_console(stderr=True).print(
        f"[red]error:[/red] {escape(commands(one_line(message)))}", soft_wrap=True
    )


def temporal_address() -> str:
    from config.settings import Settings

    return Settings.from_env().temporal_address


def rpc_problem(exc: RPCError, task_id: str | None = None, action: str = "") -> CliError:
    """What a failed Temporal call on `task_id` means for the person who made it."""
    name = task_id if task_id is not None else _id_in(exc.message)
    if _NO_ID in exc.message:
        return CliError(
            "no id given: pass the task's id (`openloop tasks list` lists them)", EXIT_UNAVAILABLE
        )
    if _FINISHED in exc.message:
        task = f"task {name}" if name else "the task"
        then = f" ({action} goes to a running task)" if action else ""
        see = f"`openloop explain {name}`" if name else "`openloop explain TASK_ID`"
        return CliError(f"{task} has already finished{then}: {see} tells how it ended", EXIT_FAILED)
    if exc.status == RPCStatusCode.NOT_FOUND:
        what = f"no task {name}" if name else f"not found: {exc.message}"
        return CliError(f"{what}: `openloop tasks list` lists the tasks", EXIT_FAILED)
    if exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
        return CliError(
            f"lost Temporal at {temporal_address()} ({exc.message}): is the stack running? "
            "`openloop status` tells; `openloop up` starts it",
            EXIT_UNAVAILABLE,
        )
    if exc.status == RPCStatusCode.INVALID_ARGUMENT:
        return CliError(f"Temporal refused the request: {exc.message}", EXIT_UNAVAILABLE)
    return CliError(f"Temporal answered {exc.status.name}: {exc.message}", EXIT_FAILED)


def _id_in(message: str) -> str | None:
    found = _NOT_FOUND_ID.search(message)
    return found.group(1) if found else None


def describe(exc: BaseException) -> CliError | None:
    """The one line (and exit code) for an error a command let escape; None: unknown."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, RPCError):
        return rpc_problem(exc)
    if isinstance(exc, WorkflowQueryFailedError | WorkflowQueryRejectedError):
        message = str(exc)
        if _NO_ID in message:
            return rpc_problem(RPCError(message, RPCStatusCode.INVALID_ARGUMENT, b""))
        return CliError(f"the task could not answer: {message}", EXIT_FAILED)
    if isinstance(exc, WorkflowUpdateFailedError):
        return CliError(f"the task refused: {exc.cause or exc}", EXIT_FAILED)
    found = _database_problem(exc)
    if found is not None:
        return found
    if isinstance(exc, RuntimeError) and (
        str(exc).startswith("Cannot reach Temporal") or "No database configured" in str(exc)
    ):
        return CliError(str(exc), EXIT_UNAVAILABLE)
    if isinstance(exc, TaskNotFound):
        return CliError(f"{exc}: `openloop tasks list` lists the tasks", EXIT_FAILED)
    return None


def _database_problem(exc: BaseException) -> CliError | None:
    try:
        import psycopg
        from psycopg_pool import PoolTimeout
    except ImportError:  # pragma: no cover - both are dependencies
        return None
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return CliError(
            "the database has no OpenLoop tables yet: `openloop up` (or `openloop setup`) adds them"
        )
    if isinstance(exc, PoolTimeout | psycopg.OperationalError):
        return _database_down(database_down_reason() or str(exc))
    return None


def _database_down(reason: str) -> CliError:
    return CliError(
        f"cannot reach the database ({reason}): is the stack running? `openloop status` tells; "
        "`openloop up` starts it",
        EXIT_UNAVAILABLE,
    )


def require_database(url: str) -> None:
    """Fail at once, in one line, when the database at `url` does not take a connection
    (a pool would wait for its timeout, logging each try)."""
    reason = database_down_reason(url)
    if reason is not None:
        raise _database_down(reason)


def database_down_reason(url: str | None = None) -> str | None:
    """Why one direct connection to the database fails, in its first line; None: it connects.
    A pool that never connected says only that it timed out."""
    import psycopg

    from config.settings import Settings

    url = url or Settings.from_env().database_url
    if not url:
        return None
    try:
        with psycopg.connect(url, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return lines[0] if lines else type(exc).__name__


def _command_path(ctx: Any) -> list[str]:
    """The words typed after `openloop`, read before the group parses them."""
    return [*getattr(ctx, "_protected_args", []), *getattr(ctx, "args", [])]


class OpenLoopGroup(TyperGroup):
    """The root command group: every command's escaped error becomes one line (see above)."""

    def invoke(self, ctx: Any) -> Any:
        path = _command_path(ctx)
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException, EOFError):  # usage errors: click's
            raise
        except Exception as exc:
            problem = describe(exc)
            if problem is None:
                if os.environ.get(DEBUG_ENV) or serves(path):
                    raise
                problem = CliError(
                    f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 to see the traceback)"
                )
            say(str(problem))
            raise typer.Exit(problem.code) from None


def quiet_clients() -> None:
    """The Temporal client and the database pool in this process log nothing of their own: a
    command that loses the stack says so once (above), instead of their retry warnings on
    stderr first. Call before any client connects; the servers (`SERVER_COMMANDS`) keep them."""
    import logging

    from temporalio.runtime import Runtime, TelemetryConfig

    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

    try:
        Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=None, metrics=None)))
    except RuntimeError:  # a runtime is already in use here: leave it
        pass


def serves(argv: list[str]) -> bool:
    """Whether these arguments run one of the server commands."""
    words = tuple(arg for arg in argv if not arg.startswith("-"))[:2]
    return words[:1] in SERVER_COMMANDS or words in SERVER_COMMANDS
