"""`openloop playbooks fire EVENT --field k=v ...`: an event fired by hand, as a sensor would.

The event must be registered by the last `openloop playbooks apply`; each `--field` is one of
its declared fields, written as text and read as the field's type (`int`, `float`, `bool`,
`enum[...]` one of its choices, `list[str]` comma-separated). The runs start exactly as a
sensor's or a webhook's do (`activities.playbooks.starts.start_listening`): the run key is
`--key`, or one made from the event and its fields, so firing the same event twice starts
nothing new; pass another `--key` to run it again. Exit codes: 0 started (or already
started), 1 bad event or fields / nobody listens, 2 no stack.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

import typer
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from temporalio.client import Client

from activities.playbooks.starts import Started, start_listening
from activities.store import playbooks as playbook_rows
from config.playbooks.typed_fields import type_text
from config.settings import Settings
from surfaces.cli.memory import fail
from surfaces.cli.playbook_runs import with_stack
from surfaces.cli.playbooks import playbooks_app
from workflows.playbook_types import EventType, FieldKind, TypedField

__all__ = ["fire_fields", "register", "run_key_for"]

EXIT_BAD = 1
console = Console(emoji=False, highlight=False, soft_wrap=True)
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def register(app: typer.Typer) -> None:
    """`openloop` wires this module in; `fire` joins the `playbooks` group."""
    playbooks_app.command("fire")(fire_command)


def _value(field: TypedField, text: str) -> Any:
    """`text` read as the field's type; ValueError says what to write."""
    if field.kind is FieldKind.INT:
        return int(text)
    if field.kind is FieldKind.FLOAT:
        return float(text)
    if field.kind is FieldKind.BOOL:
        if text.lower() not in (*_TRUE, *_FALSE):
            raise ValueError("write true or false")
        return text.lower() in _TRUE
    if field.kind is FieldKind.LIST_STR:
        return [item.strip() for item in text.split(",") if item.strip()]
    if field.kind is FieldKind.ENUM and text not in field.choices:
        raise ValueError(f"choose one of {', '.join(field.choices)}")
    return text


def fire_fields(event: EventType, written: list[str]) -> dict[str, Any]:
    """The event's fields from `--field name=value` texts; ValueError names each problem."""
    declared = {field.name: field for field in event.fields}
    known = ", ".join(f"{f.name}: {type_text(f)}" for f in event.fields) or "none"
    fields: dict[str, Any] = {}
    problems = []
    for item in written:
        name, sep, text = item.partition("=")
        if not sep or not name:
            problems.append(f"--field {item!r}: write NAME=VALUE")
        elif name not in declared:
            problems.append(f"--field {name}: {event.name} has no field {name!r} (its fields: {known})")
        else:
            try:
                fields[name] = _value(declared[name], text)
            except ValueError as exc:
                problems.append(f"--field {name}={text!r}: {name} is {type_text(declared[name])}; {exc}")
    missing = [f.name for f in event.fields if not f.optional and f.name not in fields]
    if missing:
        problems.append(
            f"{event.name} needs {', '.join(f'--field {m}=...' for m in missing)} (its fields: {known})"
        )
    if problems:
        raise ValueError("\n".join(problems))
    return fields


def run_key_for(event: str, fields: dict[str, Any]) -> str:
    """The same event with the same fields is the same firing: its runs start once."""
    digest = hashlib.sha256(json.dumps([event, fields], sort_keys=True).encode()).hexdigest()
    return f"fire-{digest[:20]}"


def _say(outcome: Started, event: str) -> None:
    for run in outcome.started:
        console.print(f"[green]✓[/green] started  {escape(run)}")
    for run in outcome.duplicates:
        console.print(f"[dim]already started for this firing[/dim]  {escape(run)}")
    if outcome.duplicates and not outcome.started:
        console.print(f"the same {escape(event)} was fired before; pass --key KEY to start new runs")
    for name in outcome.refused:
        console.print(f"[yellow]![/yellow] {escape(name)} not started: this event has started its most runs")


def fire_command(
    event: Annotated[str, typer.Argument(help="A registered event, e.g. TextSubmitted")],
    field: Annotated[
        list[str] | None, typer.Option("--field", help="NAME=VALUE, one per field of the event")
    ] = None,
    key: Annotated[
        str | None, typer.Option(help="What makes this firing unique (default: the event and its fields)")
    ] = None,
) -> None:
    """Fire a registered event by hand: start the runs of the playbooks that start on it."""
    settings = Settings.from_env()

    async def work(pool: AsyncConnectionPool, client: Client) -> Started:
        registered = {e.name: e for e in await playbook_rows.registered_events(pool)}
        if event not in registered:
            known = ", ".join(sorted(registered)) or "none: apply a playbooks folder first"
            raise fail(f"no registered event {event!r}; registered: {known}", EXIT_BAD)
        try:
            fields = fire_fields(registered[event], field or [])
        except ValueError as exc:
            raise fail(str(exc), EXIT_BAD) from None
        if not await playbook_rows.listening(pool, event):
            raise fail(f"no applied playbook starts on {event}; a step with `on: {event}` would", EXIT_BAD)
        run_key = key or run_key_for(event, fields)
        return await start_listening(client, pool, settings.task_queue, event, fields, run_key)

    _say(with_stack(work), event)
