"""A local stand-in for Discord (REST API v10, the Gateway, signed interactions), for tests.

A real HTTP server on 127.0.0.1 (aiohttp, in its own thread). The real discord.py client talks
to it when `discord.http.Route.BASE` is set to `api_url` and `DiscordWebSocket.DEFAULT_GATEWAY`
to `gateway_url`; a plain httpx client talks to `api_url` with `Authorization: Bot <token>`.

What Discord does and the fake copies, because clients depend on it: bodies are sent as
exactly `application/json` (discord.py reads anything else as text); every answer carries the
X-RateLimit-* headers and `Via` (discord.py treats a 429 without `Via` as a Cloudflare ban and
does not retry); a 429 body holds `retry_after` in seconds. Messages the bot posts over REST
come back to it as MESSAGE_CREATE, as on Discord, so a bot must ignore its own messages.

The world (one guild `acme`, channels `eng` and `platform`, alice, bob and mia) lives in
`discord_objects.py`; REST routes in `discord_rest.py`; the Gateway in `discord_gateway.py`;
signed interactions and the responses to them in `discord_interactions.py`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web

from tests.fakes.discord_gateway import Gateway
from tests.fakes.discord_interactions import Interactions
from tests.fakes.discord_objects import APPLICATION_ID, BOT_ID, World, message
from tests.fakes.discord_rest import Rest
from tests.fakes.discord_wire import BODY, Buckets, reply
from tests.fakes.thread_server import ThreadServer

API_PREFIX = "/api/v10"
# Discord answers these without the bot token: the interaction token in the URL is the secret.
_TOKENLESS_PREFIXES = ("/interactions/", "/webhooks/")


@dataclass
class Call:
    method: str
    path: str  # below /api/v10, without the query
    json: Any
    status: int
    query: dict[str, str] = field(default_factory=dict)


class FakeDiscord:
    def __init__(self, token: str = "fake-discord-bot-token", application_id: str = APPLICATION_ID):
        self.token = token
        self.application_id = application_id
        self.world = World()
        self.lock = threading.Lock()  # guards world, calls and the records below
        self.calls: list[Call] = []
        self.commands: dict[str | None, list[dict[str, Any]]] = {}  # guild id (None: global)
        self.reactions: dict[tuple[str, str], list[str]] = {}
        self.typing: list[str] = []
        self.buckets = Buckets()
        self.gateway = Gateway(self)
        self.rest = Rest(self)
        self.interactions = Interactions(self)
        self._server = ThreadServer("fake-discord")

    # Lifecycle ---------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return self.gateway.url

    @property
    def port(self) -> int:
        return self._server.port

    def start(self) -> FakeDiscord:
        self._server.start(self._app)
        return self

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        app.router.add_get("/gateway", self.gateway.serve)
        for method, path, handler in [*self.rest.routes(), *self.interactions.routes()]:
            app.router.add_route(method, API_PREFIX + path, handler)
        return app

    def stop(self) -> None:
        self._server.stop(before=self.gateway.close_all)

    def __enter__(self) -> FakeDiscord:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, work: Awaitable[Any], timeout: float = 10) -> Any:
        return self._server.run(work, timeout)

    # Test controls -----------------------------------------------------------------------

    def rate_limit(self, method: str, path_prefix: str, times: int = 1, retry_after: float = 0.2) -> None:
        """Answer the next `times` requests of `method` whose path (below /api/v10) starts with
        `path_prefix` with HTTP 429, as Discord does when a bucket is exhausted."""
        with self.lock:
            prefix = path_prefix.removeprefix(API_PREFIX)
            self.buckets.told.append([method.upper(), prefix, times, retry_after])

    def messages(self, channel_id: str) -> list[dict[str, Any]]:
        """The messages in a channel or thread, oldest first, with edits applied."""
        with self.lock:
            return [dict(m) for m in self.world.messages.get(channel_id, [])]

    @property
    def interaction_responses(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(r) for r in self.interactions.responses]

    @property
    def ephemerals(self) -> list[dict[str, Any]]:
        """Interaction replies only their user sees (flags 64); never in `messages`."""
        with self.lock:
            return [dict(m) for m in self.interactions.ephemerals]

    def say(
        self, channel_id: str, author_id: str, content: str, *, mention_bot: bool = False
    ) -> dict[str, Any]:
        """A person posts in a channel or thread: stored, then MESSAGE_CREATE on the Gateway."""
        with self.lock:
            if self.world.channel(channel_id) is None or author_id not in self.world.users:
                raise KeyError(
                    f"say({channel_id!r}, {author_id!r}): use a channel or thread of the fake "
                    "(ENG_CHANNEL_ID, PLATFORM_CHANNEL_ID, a thread made over REST) and a member's id"
                )
            author = self.world.users[author_id]
            text = f"<@{BOT_ID}> {content}" if mention_bot else content
            mentions = [self.world.users[BOT_ID]] if mention_bot else []
            posted = self.store_message(channel_id, message(channel_id, author, text, mentions=mentions))
        self._run(self.dispatch_message("MESSAGE_CREATE", posted))
        return dict(posted)

    def wait_for_gateway(self, timeout: float = 10) -> None:
        """Block until a client has sent IDENTIFY and been given READY."""
        self._run(asyncio.wait_for(self.gateway.identified.wait(), timeout), timeout + 1)

    def drop_gateway(self) -> None:
        """Close every Gateway socket as a network fault would; clients should RESUME."""
        self._run(self.gateway.drop())

    # Signed interactions (see discord_interactions.py) ------------------------------------

    @property
    def public_key(self) -> str:
        return self.interactions.public_key

    def sign(self, body: bytes, timestamp: str | None = None) -> dict[str, str]:
        return self.interactions.sign(body, timestamp)

    def command_interaction(
        self, user_id: str, channel_id: str, subcommand: str, options: dict[str, str]
    ) -> dict[str, Any]:
        return self.interactions.command(user_id, channel_id, subcommand, options)

    def button_interaction(self, user_id: str, message: dict[str, Any], custom_id: str) -> dict[str, Any]:
        return self.interactions.button(user_id, message, custom_id)

    def ping_interaction(self) -> dict[str, Any]:
        return self.interactions.ping()

    def deliver(
        self, url: str, payload: dict[str, Any], *, forge: bool = False, stale: bool = False
    ) -> httpx.Response:
        return self.interactions.deliver(url, payload, forge=forge, stale=stale)

    # Shared by the route modules ------------------------------------------------------------

    def store_message(self, channel_id: str, posted: dict[str, Any]) -> dict[str, Any]:
        """Keep a message (call with the lock held); threads count their messages."""
        self.world.messages.setdefault(channel_id, []).append(posted)
        channel = self.world.channel(channel_id)
        if channel is not None:
            channel["last_message_id"] = posted["id"]
            if channel["type"] in (10, 11, 12):
                channel["message_count"] += 1
                channel["total_message_sent"] += 1
        return posted

    async def dispatch_message(self, event: str, posted: dict[str, Any]) -> None:
        """MESSAGE_CREATE / MESSAGE_UPDATE as the Gateway sends them: with guild_id, the
        author's member and each mention's member."""
        with self.lock:
            members = self.world.members
            shown = dict(posted, guild_id=self.world.guild_id_of(posted["channel_id"]))
            author = members.get(posted["author"]["id"])
            if author is not None:
                shown["member"] = {k: v for k, v in author.items() if k != "user"}
            shown["mentions"] = [
                dict(u, member={k: v for k, v in members[u["id"]].items() if k != "user"})
                if u["id"] in members
                else u
                for u in posted.get("mentions", [])
            ]
        await self.gateway.dispatch(event, shown, message=True)

    # HTTP -----------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not request.path.startswith(API_PREFIX):
            return await handler(request)
        path = request.path.removeprefix(API_PREFIX)
        try:
            request[BODY] = await _body(request)
        except ValueError:
            return reply({"message": "The request body contains invalid JSON.", "code": 50109}, 400)
        call = Call(request.method, path, request[BODY], 200, dict(request.query))
        with self.lock:
            self.calls.append(call)
            limited = self.buckets.take(request.method, path)
        if limited is not None:
            response: web.StreamResponse = reply(
                {"message": "You are being rate limited.", "retry_after": limited, "global": False}, 429
            )
        elif not path.startswith(_TOKENLESS_PREFIXES) and request.headers.get("Authorization") != (
            f"Bot {self.token}"
        ):
            response = reply({"message": "401: Unauthorized", "code": 0}, 401)
        else:
            try:
                response = await handler(request)
            except web.HTTPNotFound:
                response = reply({"message": "404: Not Found", "code": 0}, 404)
            except web.HTTPMethodNotAllowed:
                response = reply({"message": "405: Method Not Allowed", "code": 0}, 405)
        with self.lock:
            call.status = response.status
            response.headers.update(self.buckets.headers(request, limited))
        return response


async def _body(request: web.Request) -> Any:
    """A JSON body, or the `payload_json` part of a multipart one (messages with files)."""
    if request.content_type == "application/json" and request.can_read_body:
        return await request.json()
    if request.content_type.startswith("multipart/") and request.can_read_body:
        form = await request.post()
        raw = form.get("payload_json")
        return json.loads(raw) if isinstance(raw, str) else None
    return None
