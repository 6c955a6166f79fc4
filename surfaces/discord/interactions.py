"""The Discord surface in the surfaces server: the interactions endpoint, the inbox, the Gateway.

`POST /discord/interactions` is the app's Interactions Endpoint URL. Each request is checked
against Discord's Ed25519 signature first (`surfaces.discord.verify`; forged, unsigned or stale
→ 401, and Discord itself refuses to save an endpoint that accepts a forged PING). A PING is
answered PONG. A slash command or a button click is recorded in the inbox under its interaction
id (a repeated delivery adds nothing) and answered "thinking" at once — privately for clicks and
`status`, so only the clicker reads the outcome —; the inbox dispatches it right after
(`surfaces.discord.commands`). With a bot token set, the Gateway session runs alongside
(`surfaces.discord.gateway`) and messages go through the same inbox (`surfaces.discord.dispatch`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from psycopg_pool import AsyncConnectionPool

from activities.store.db import get_pool
from surfaces.background import add_background
from surfaces.discord.commands import Interactions, command_options
from surfaces.discord.dispatch import DiscordDispatcher
from surfaces.discord.gateway import gateway_runner
from surfaces.discord.verify import signature_problem
from surfaces.inbox import Handler, SurfaceInbox
from surfaces.outcome import Outcome

log = logging.getLogger("openloop.discord")

PING, COMMAND, COMPONENT = 1, 2, 3
PONG, DEFERRED_MESSAGE = 1, 5
EPHEMERAL = 1 << 6


def register(app: FastAPI) -> None:
    @app.post("/discord/interactions")
    async def discord_interactions(request: Request) -> Response:
        body = await request.body()
        public_key = request.app.state.settings.discord_public_key
        if not public_key:
            log.error("discord interaction refused: DISCORD_PUBLIC_KEY is not set")
            return JSONResponse({"error": "discord_not_configured"}, status_code=503)
        problem = signature_problem(
            public_key,
            request.headers.get("x-signature-ed25519"),
            request.headers.get("x-signature-timestamp"),
            body,
        )
        if problem is not None:
            client = request.client.host if request.client else "unknown"
            log.warning("discord interaction rejected (401) from %s: %s", client, problem)
            return JSONResponse({"error": "invalid request signature"}, status_code=401)
        try:
            interaction = json.loads(body)
        except ValueError:
            return JSONResponse({"error": "body is not JSON"}, status_code=400)
        if not isinstance(interaction, dict) or not isinstance(interaction.get("id"), str):
            return JSONResponse({"error": "not an interaction"}, status_code=400)
        if interaction.get("type") == PING:
            return JSONResponse({"type": PONG})
        if interaction.get("type") not in (COMMAND, COMPONENT):
            return JSONResponse({"error": f"interaction type {interaction.get('type')!r}"}, status_code=400)
        try:
            await inbox_for(request.app).record(interaction["id"], {"kind": "interaction", **interaction})
        except Exception:
            log.exception("discord interaction %s could not be recorded", interaction["id"])
            return JSONResponse({"error": "not recorded"}, status_code=503)
        return JSONResponse({"type": DEFERRED_MESSAGE, "data": {"flags": _flags(interaction)}})

    settings = app.state.settings
    if settings.discord_bot_token is None and not settings.discord_public_key:
        return  # Discord is not set up: the endpoint answers 503, nothing else runs
    add_background(app, lambda stop: inbox_for(app).run(stop))
    if settings.discord_bot_token is not None:
        add_background(app, gateway_runner(settings, inbox_for(app)))


def _flags(interaction: dict[str, Any]) -> int:
    """Clicks and `/openloop status` are answered privately; `/openloop ask` in the channel."""
    if interaction.get("type") == COMPONENT:
        return EPHEMERAL
    name, _ = command_options(interaction)
    return 0 if name == "ask" else EPHEMERAL


def inbox_for(app: FastAPI) -> SurfaceInbox:
    inbox: SurfaceInbox | None = getattr(app.state, "discord_inbox", None)
    if inbox is None:
        settings = app.state.settings

        async def pool() -> AsyncConnectionPool:
            return await get_pool(settings.require_database_url(), checked=False)

        def handler() -> Handler | None:
            return _handler(app)

        inbox = SurfaceInbox("discord", pool, handler)
        app.state.discord_inbox = inbox
    return inbox


def _handler(app: FastAPI) -> Handler | None:
    """Messages to the dispatcher, interactions to `Interactions`; None without Temporal yet."""
    temporal = app.state.temporal
    if temporal is None:
        return None
    parts = getattr(app.state, "discord_parts", None)
    if parts is None or parts[0].temporal is not temporal:
        settings = app.state.settings
        parts = (DiscordDispatcher(settings, temporal), Interactions(settings, temporal))
        app.state.discord_parts = parts
    dispatcher, interactions = parts

    async def handle(payload: dict[str, Any]) -> Outcome:
        if payload.get("kind") == "interaction":
            return await interactions.handle(payload)
        return await dispatcher.handle(payload)

    return handle
