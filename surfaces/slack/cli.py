"""`openloop slack socket`: Slack over Socket Mode, for local use without a public URL; and
`openloop slack manifest`: the Slack app manifest the agents need (`surfaces.slack.manifest`).

slack-sdk's Socket Mode client holds the websocket (SLACK_APP_TOKEN). Events go the way of
the HTTP endpoint: recorded in the Slack inbox, acknowledged, then started or signalled by
the inbox dispatcher running in this process. A click is signalled before its ack. An
envelope that could not be recorded or signalled is left unacknowledged, so Slack delivers
it again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
import yaml
from psycopg_pool import AsyncConnectionPool
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from temporalio.client import Client

from activities.slack.client import bot_client
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.outcome import Outcome
from surfaces.slack import inbox
from surfaces.slack.dispatch import SlackDispatcher
from surfaces.slack.first_sign import FirstSign
from surfaces.slack.manifest import manifest as app_manifest

log = logging.getLogger("openloop.slack")

slack_app = typer.Typer(help="Slack surface commands.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(slack_app, name="slack")


class ManifestFormat(StrEnum):
    YAML = "yaml"
    JSON = "json"


@slack_app.command("manifest")
def manifest(
    files: Annotated[
        list[Path] | None,
        typer.Option("--file", "-f", help="Agent files to read (default: the applied agents)."),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help="The surfaces' public base URL, for the Events API's request URLs."),
    ] = None,
    socket_mode: Annotated[
        bool | None,
        typer.Option("--socket-mode/--events-api", help="Default: Socket Mode when SLACK_APP_TOKEN is set."),
    ] = None,
    name: Annotated[str, typer.Option("--name", help="The app's name in Slack.")] = "OpenLoop",
    output: Annotated[ManifestFormat, typer.Option("--output", "-o")] = ManifestFormat.YAML,
) -> None:
    """Print the Slack app manifest with exactly the scopes and events the agents need.

    Paste it at api.slack.com/apps → Create New App → From a manifest."""
    settings = Settings.from_env()
    agents = _agents_from(files) if files else _applied_agents()
    socket = socket_mode if socket_mode is not None else settings.slack_app_token is not None
    if not socket and url is None:
        typer.echo(
            "note: no --url given; replace https://openloop.example.com with your surfaces' URL", err=True
        )
    document = app_manifest(agents, name=name, socket_mode=socket, base_url=url)
    if output is ManifestFormat.JSON:
        typer.echo(json.dumps(document, indent=2))
    else:
        typer.echo(yaml.safe_dump(document, sort_keys=False).rstrip("\n"))


def _agents_from(files: list[Path]) -> list[AgentConfig]:
    """The agents in these files (folders: their YAML files); problems go to stderr."""
    from activities.tools.catalog import tool_permissions
    from config.loader import AgentConfigError, load_agent_documents

    paths = [p for f in files for p in (sorted(f.glob("*.y*ml")) if f.is_dir() else [f])]
    agents: list[AgentConfig] = []
    for path in paths:
        try:
            agents += load_agent_documents(path, tools=tool_permissions())
        except AgentConfigError as exc:
            for problem in exc.problems:
                typer.echo(f"error: {problem}", err=True)
            raise typer.Exit(1) from None
    return agents


def _applied_agents() -> list[AgentConfig]:
    from activities.store.agents import list_agents
    from surfaces.cli.agents_db import with_database

    return [stored.config for stored in with_database(list_agents)]


@slack_app.command("socket")
def socket() -> None:
    """Connect to Slack over Socket Mode, for local use without a public URL.

    Uses SLACK_APP_TOKEN for the connection and SLACK_BOT_TOKEN for replies; handles
    mentions, thread replies and approval buttons like the HTTP endpoints. Runs until
    interrupted.
    """
    settings = Settings.from_env()
    missing = [
        name
        for name, value in (
            (
                "SLACK_APP_TOKEN (an app-level token, xapp-..., with connections:write)",
                settings.slack_app_token,
            ),
            ("SLACK_BOT_TOKEN (the bot token, xoxb-...)", settings.slack_bot_token),
            (
                "a database (OPENLOOP_DATABASE_URL, or start the stack with `openloop up`)",
                settings.database_url,
            ),
        )
        if not value
    ]
    if missing:
        typer.echo("error: Socket Mode needs " + "; ".join(missing), err=True)
        raise typer.Exit(2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(run_socket_mode(settings))
    except KeyboardInterrupt:
        typer.echo("Socket Mode stopped.")


async def run_socket_mode(
    settings: Settings, *, client: Client | None = None, stop: asyncio.Event | None = None
) -> None:
    """Hold the Socket Mode connection until `stop` is set (or forever)."""
    if client is None:
        from surfaces.client import connect

        client = await connect(settings)
    assert settings.slack_app_token is not None
    dispatcher = SlackDispatcher(settings, client)
    database_url = settings.require_database_url()

    async def pool() -> AsyncConnectionPool:
        return await get_pool(database_url, checked=False)

    # The working reaction goes up as soon as an event is recorded, as over the Events API.
    events = inbox.InboxDispatcher(
        pool, lambda: dispatcher.handle_event, FirstSign(settings, lambda: dispatcher)
    )
    socket_client = SocketModeClient(
        app_token=settings.slack_app_token.get_secret_value(),
        web_client=bot_client(settings),
    )
    socket_client.socket_mode_request_listeners.append(partial(on_request, dispatcher, events))
    stop = stop or asyncio.Event()
    draining = asyncio.create_task(events.run(stop))  # also drains what a previous run left
    await socket_client.connect()
    log.info("Slack Socket Mode connected; waiting for events (Ctrl-C to stop)")
    try:
        await stop.wait()
    finally:
        stop.set()
        await socket_client.close()
        await draining


async def on_request(
    dispatcher: SlackDispatcher,
    events: inbox.InboxDispatcher,
    client: SocketModeClient,
    request: SocketModeRequest,
) -> None:
    try:
        if request.type == "events_api":
            outcome = await events.accept(request.payload, request.retry_attempt or 0)
        elif request.type == "interactive":
            outcome = await dispatcher.handle_interaction(request.payload)
        else:
            outcome = Outcome(f"ignored: {request.type}")
    except Exception:
        log.exception("slack socket %s failed; leaving it for redelivery", request.type)
        return
    if outcome.status >= 500:
        log.warning("slack socket %s not acknowledged: %s", request.type, outcome.note)
        return
    await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
    if outcome.status >= 400:
        log.warning("slack socket %s rejected: %s", request.type, outcome.note)
    await outcome.run_followups()
