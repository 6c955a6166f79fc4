"""`openloop agents convert`, and the Slack names `validate` and `apply` resolve.

`convert` prints (or `-o` writes) an agent file in the other form: the seed form (surface
lists, tool groups, approvals by permission, pyopenloop's fields; see `config.seed_form`) as
today's form with the user's lines and comments kept (`config.seed_convert`), or `--to
seed` back.
`resolve_loaded` turns `#channel` and `@handle` into Slack ids through the Slack API
(`activities.slack.names`); `apply` needs it to succeed, `validate` without a Slack token
only says which names will be resolved at apply. At apply, each `#channel` resolved is also
recorded by id in `slack_channel_names` (the table a `channel_rename` event updates), so
the first rename's audit line names the channel's old name.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import aiohttp
import typer
import yaml
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from slack_sdk.errors import SlackApiError

from activities.slack.client import bot_client, error_code
from activities.slack.names import NameProblem, SlackNames, names_in, resolve_names
from activities.tools.catalog import tool_permissions
from config.agent import AgentConfig
from config.loader import AgentConfigError, ConfigProblem, expanded_documents, value_location
from config.seed_convert import convert_text
from config.seed_form_back import to_seed_form
from config.settings import Settings
from surfaces.cli.agents_db import with_database
from surfaces.slack.directory_events import rename_channel_name

Loaded = list[tuple[Path, list[AgentConfig]]]

# The scopes the three listings need, named when Slack refuses one.
NAME_SCOPES = "channels:read, groups:read, users:read, usergroups:read"


class Form(StrEnum):
    CURRENT = "current"
    SEED = "seed"


def convert(
    file: Annotated[Path, typer.Option("--file", "-f", help="Agent YAML file (one or more documents).")],
    to: Annotated[
        Form, typer.Option("--to", help="current: today's form (from either); seed: the seed form's shapes.")
    ] = Form.CURRENT,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the converted file here (default: print it).")
    ] = None,
) -> None:
    """Print (or write) an agent file in the other form. To today's form, the user's lines and
    comments are kept and each changed line says what it was; `--to seed` keeps no comments."""
    tools = tool_permissions()
    errors = Console(emoji=False, stderr=True, highlight=False)
    try:
        documents = expanded_documents(file, tools=tools)
    except AgentConfigError as exc:
        for problem in exc.problems:
            errors.print(f"[red]✗[/red] {escape(str(problem))}", soft_wrap=True)
        raise typer.Exit(1) from None
    if to is Form.SEED:
        seed = [to_seed_form(expansion.data, tools) for _, expansion in documents]
        text = yaml.safe_dump_all(seed, sort_keys=False, allow_unicode=True)
    else:
        text = convert_text(file.read_text(encoding="utf-8"), documents)
    if output is None:
        typer.echo(text.rstrip("\n"))
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        reason = escape(exc.strerror or str(exc))
        errors.print(f"[red]✗[/red] cannot write {escape(str(output))}: {reason}", soft_wrap=True)
        raise typer.Exit(1) from None
    typer.echo(f"wrote {output}")


def _problem(path: Path, document: int, found: NameProblem) -> ConfigProblem:
    line, field = value_location(path, document, found.name)
    return ConfigProblem(str(path), line, field or ".".join(str(p) for p in found.loc), found.message)


async def _resolve_all(
    loaded: Loaded, settings: Settings
) -> tuple[Loaded, list[ConfigProblem], dict[str, str]]:
    """The resolved agents, the names that did not resolve, and each channel id a `#name`
    resolved to -> that name."""
    names = SlackNames(bot_client(settings))
    resolved: Loaded = []
    problems: list[ConfigProblem] = []
    channels: dict[str, str] = {}
    for path, configs in loaded:
        mine: list[AgentConfig] = []
        for document, config in enumerate(configs):
            for name in names_in(config):
                channel = await names.channel(name[1:]) if name.startswith("#") else None
                if channel is not None:  # read from the listing resolve_names reads too
                    channels[channel] = name[1:]
            config, found = await resolve_names(config, names)
            problems += [_problem(path, document, f) for f in found]
            mine.append(config)
        resolved.append((path, mine))
    return resolved, problems, channels


async def record_channel_names(pool: AsyncConnectionPool, channels: dict[str, str]) -> None:
    """Remember the name each bound channel had at apply (channel id -> name)."""
    for channel_id, name in channels.items():
        await rename_channel_name(pool, channel_id, name)


def resolve_loaded(loaded: Loaded, *, required: bool) -> tuple[Loaded, bool]:
    """The agents with Slack names replaced by ids, and whether every name resolved.

    Without a Slack token: `required` (apply) fails naming each name; otherwise (validate)
    the names are accepted with a note that apply will resolve them."""
    console = Console(emoji=False, highlight=False)
    pending = {path: [n for c in configs for n in names_in(c)] for path, configs in loaded}
    if not any(pending.values()):
        return loaded, True
    settings = Settings.from_env()
    if settings.slack_bot_token is None:
        for path, names in pending.items():
            if not names:
                continue
            shown = escape(", ".join(dict.fromkeys(names)))
            if required:
                console.print(
                    f"[red]✗[/red] {escape(str(path))}: cannot resolve {shown}: SLACK_BOT_TOKEN is not "
                    "set; set it (the names are looked up in Slack at apply) or write the ids",
                    soft_wrap=True,
                )
            else:
                console.print(f"  note: {shown} will be resolved through Slack at apply", soft_wrap=True)
        return loaded, not required
    try:
        resolved, problems, channels = asyncio.run(_resolve_all(loaded, settings))
    except SlackApiError as exc:
        console.print(
            f"[red]✗[/red] cannot read Slack names ({escape(error_code(exc))}); the bot token needs "
            f"{NAME_SCOPES}",
            soft_wrap=True,
        )
        return loaded, False
    except (aiohttp.ClientError, TimeoutError) as exc:
        console.print(f"[red]✗[/red] cannot reach Slack to resolve names: {escape(str(exc))}", soft_wrap=True)
        return loaded, False
    for problem in problems:
        console.print(f"[red]✗[/red] {escape(str(problem))}", soft_wrap=True)
    if required and channels and not problems:  # apply: the names, for the first rename's audit
        with_database(lambda pool: record_channel_names(pool, channels), migrate=True)
    return resolved, not problems
