"""`openloop slack socket`: Slack over Socket Mode, for local use without a public URL.

slack-sdk's Socket Mode client holds the websocket (SLACK_APP_TOKEN). Events go the way of
the HTTP endpoint: recorded in the Slack inbox, acknowledged, then started or signalled by
the inbox dispatcher running in this process. A click is signalled before its ack. An
envelope that could not be recorded or signalled is left unacknowledged, so Slack delivers
it again.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

import typer
from psycopg_pool import AsyncConnectionPool
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from temporalio.client import Client

from activities.slack.client import bot_client
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.slack import inbox
from surfaces.slack.dispatch import SlackDispatcher
from surfaces.slack.outcome import Outcome

log = logging.getLogger("openloop.slack")

slack_app = typer.Typer(help="Slack surface commands.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(slack_app, name="slack")


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

    events = inbox.InboxDispatcher(pool, lambda: dispatcher.handle_event)
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
