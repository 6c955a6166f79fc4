"""Which loop file a command was given, read either way: our YAML `kind: Loop`, or the
thu-nmrc toolkit's `openloop.json` (a file, or the workspace folder holding it), whose keys
with no meaning here are warned about by name, never refused. Also `openloop loops convert`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from config.loop import load_loop_file
from config.loop_convert import convert_json_loop
from config.loop_json import JSON_LOOP_NAME, load_json_loop
from config.problems import AgentConfigError, ConfigProblem
from workflows.loop_types import LoopSpec

EXIT_INVALID = 4


def loop_file(given: Path) -> Path:
    """`given`, or for a toolkit workspace folder the openloop.json in it."""
    if given.is_dir() and (given / JSON_LOOP_NAME).is_file():
        return given / JSON_LOOP_NAME
    return given


def is_json(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def _problems(console: Console, problems: list[ConfigProblem], mark: str) -> None:
    for problem in problems:
        console.print(f"{mark} {escape(str(problem))}")


def load_loop(given: Path, console: Console) -> LoopSpec:
    """The loop in `given`, its warnings printed; exit 4 with every problem when it is invalid."""
    path = loop_file(given)
    try:
        if not is_json(path):
            return load_loop_file(path)
        spec, warnings = load_json_loop(path)
    except AgentConfigError as exc:
        _problems(console, exc.problems, "[red]✗[/red]")
        raise typer.Exit(EXIT_INVALID) from None
    _problems(console, warnings, "[yellow]![/yellow]")
    return spec


def convert(
    file: Annotated[Path, typer.Argument(help="An openloop.json, or the workspace folder holding one.")],
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="Write the YAML loop here instead of printing it.")
    ] = None,
) -> None:
    """Write an openloop.json as a YAML loop file, with a comment on each line it changed."""
    console = Console(emoji=False, highlight=False, soft_wrap=True, stderr=True)
    path = loop_file(file)
    if not is_json(path):
        console.print(
            f"[red]✗[/red] {escape(str(path))} is not an openloop.json: a YAML loop needs no converting"
        )
        raise typer.Exit(EXIT_INVALID)
    if out is not None and out.exists():
        console.print(f"[red]✗[/red] {escape(str(out))} already exists: choose another name or move it away")
        raise typer.Exit(1)
    try:
        text = convert_json_loop(path, out.parent if out is not None else Path.cwd())
    except AgentConfigError as exc:
        _problems(console, exc.problems, "[red]✗[/red]")
        raise typer.Exit(EXIT_INVALID) from None
    if out is None:
        print(text, end="")
        return
    out.write_text(text, encoding="utf-8")
    console.print(
        f"[green]✓[/green] wrote {escape(str(out))}; next: openloop loops doctor {escape(str(out))}"
    )
