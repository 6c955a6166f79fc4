"""The fake Discord's Gateway: the websocket a bot holds open to receive events.

Speaks what Discord documents and what discord.py's `DiscordWebSocket` expects: HELLO (op 10)
first; IDENTIFY (op 2) checked against the bot token and answered with READY then one
GUILD_CREATE; HEARTBEAT (op 1) answered with HEARTBEAT_ACK (op 11); RESUME (op 6) answered with
the events the session missed, then RESUMED; REQUEST_GUILD_MEMBERS (op 8) answered with one
GUILD_MEMBERS_CHUNK. Frames are JSON text, or one zlib stream per connection flushed with
Z_SYNC_FLUSH after each payload when the URL asks for `compress=zlib-stream` (what discord.py
asks for when `zstandard` is not installed). Sequence numbers count up per session.

Events are kept per session, so a client that reconnects and resumes gets what it missed.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from tests.fakes.discord_objects import (
    BOT_ID,
    GUILD_ID,
    INTENT_GUILD_MESSAGES,
    INTENT_MESSAGE_CONTENT,
)

if TYPE_CHECKING:
    from tests.fakes.discord_api import FakeDiscord

HEARTBEAT_INTERVAL_MS = 41250  # what Discord sends today
# Close codes from Discord's gateway documentation.
UNKNOWN_OPCODE, NOT_AUTHENTICATED, AUTHENTICATION_FAILED, ALREADY_AUTHENTICATED = 4001, 4003, 4004, 4005
DECODE_ERROR, INVALID_SEQ = 4002, 4007
_HIDDEN_WITHOUT_CONTENT = ("content", "embeds", "attachments", "components")


@dataclass
class Session:
    session_id: str
    intents: int
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)  # every dispatch, for RESUME
    socket: web.WebSocketResponse | None = None
    deflate: Any = None  # zlib compress object of the current connection, if compressed


class Gateway:
    def __init__(self, fake: FakeDiscord) -> None:
        self._fake = fake
        self.sessions: dict[str, Session] = {}
        self.identifies: list[dict[str, Any]] = []  # IDENTIFY payloads (token left out)
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.compressions: list[str | None] = []  # the `compress` each connection asked for
        self.identified = asyncio.Event()  # set in the server's loop

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self._fake.port}/gateway"

    # Called in the server's loop ---------------------------------------------------------

    async def dispatch(self, event: str, data: dict[str, Any], *, message: bool = False) -> None:
        """Send an event to every identified session; missed ones wait for a RESUME.

        `message`: a guild message event, sent only with the GUILD_MESSAGES intent."""
        for session in list(self.sessions.values()):
            if message and not session.intents & INTENT_GUILD_MESSAGES:
                continue
            shown = _as_seen(data, session.intents) if message else data
            await self._send_event(session, event, shown)

    async def drop(self) -> None:
        for session in list(self.sessions.values()):
            socket, session.socket = session.socket, None  # the session lives on, for RESUME
            if socket is not None:
                await socket.close(code=4000, message=b"dropped by the test")

    async def close_all(self) -> None:
        for session in list(self.sessions.values()):
            if session.socket is not None:
                await session.socket.close()

    async def serve(self, request: web.Request) -> web.StreamResponse:
        compress = request.query.get("compress")
        if compress not in (None, "zlib-stream"):
            return web.Response(status=400, text=f"compress={compress} is not supported by the fake")
        if request.query.get("encoding", "json") != "json":
            return web.Response(status=400, text="only encoding=json is supported by the fake")
        socket = web.WebSocketResponse(autoping=True, compress=True)
        await socket.prepare(request)
        self.compressions.append(compress)
        deflate = zlib.compressobj() if compress else None
        session: Session | None = None
        hello = {"op": 10, "s": None, "t": None, "d": {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}}
        await _send(socket, deflate, hello)
        async for frame in socket:
            if frame.type != WSMsgType.TEXT:
                continue
            try:
                payload = json.loads(frame.data)
                op, data = payload.get("op"), payload.get("d")
            except (ValueError, AttributeError):
                await socket.close(code=DECODE_ERROR, message=b"Error while decoding payload.")
                break
            if op == 1:
                self.heartbeats += 1
                await _send(socket, deflate, {"op": 11, "s": None, "t": None, "d": None})
            elif op in (2, 6) and session is not None:
                await socket.close(code=ALREADY_AUTHENTICATED, message=b"Already authenticated.")
            elif op in (2, 6) and data.get("token") != self._fake.token:
                await socket.close(code=AUTHENTICATION_FAILED, message=b"Authentication failed.")
            elif op == 2:
                session = await self._identify(socket, deflate, data)
            elif op == 6:
                session = await self._resume(socket, deflate, data)
            elif session is None:
                await socket.close(code=NOT_AUTHENTICATED, message=b"Not authenticated.")
            elif op == 8:
                await self._send_event(session, "GUILD_MEMBERS_CHUNK", self._members_chunk(data))
            elif op not in (3, 4):  # presence and voice state updates change nothing here
                await socket.close(code=UNKNOWN_OPCODE, message=b"Unknown opcode.")
        if session is not None and session.socket is socket:
            session.socket = None
            if socket.close_code in (1000, 1001):
                self.sessions.pop(session.session_id, None)  # a clean close by the bot ends it
        return socket

    # Internals ------------------------------------------------------------------------------

    async def _identify(self, socket: web.WebSocketResponse, deflate: Any, data: dict[str, Any]) -> Session:
        session = Session(session_id=secrets.token_hex(16), intents=int(data.get("intents") or 0))
        session.socket, session.deflate = socket, deflate
        self.identifies.append({k: v for k, v in data.items() if k != "token"})
        self.sessions[session.session_id] = session
        fake = self._fake
        with fake.lock:
            ready = {
                "v": 10,
                "user": dict(fake.world.bot),
                "guilds": [{"id": GUILD_ID, "unavailable": True}],
                "session_id": session.session_id,
                "session_type": "normal",
                "resume_gateway_url": self.url,
                "shard": data.get("shard", [0, 1]),
                "application": {"id": fake.application_id, "flags": 0},
                "private_channels": [],
                "relationships": [],
                "presences": [],
                "guild_join_requests": [],
                "geo_ordered_rtc_regions": [],
                "user_settings": {},
                "_trace": ['["fake-discord-gateway",{"micros":0}]'],
            }
            guild = fake.world.guild_create()
        await self._send_event(session, "READY", ready)
        await self._send_event(session, "GUILD_CREATE", guild)
        self.identified.set()
        return session

    async def _resume(
        self, socket: web.WebSocketResponse, deflate: Any, data: dict[str, Any]
    ) -> Session | None:
        self.resumes.append({k: v for k, v in data.items() if k != "token"})
        session = self.sessions.get(str(data.get("session_id")))
        seq = data.get("seq")
        if session is None or not isinstance(seq, int) or seq > session.seq:
            # INVALID_SESSION, not resumable: the bot must IDENTIFY again.
            await _send(socket, deflate, {"op": 9, "s": None, "t": None, "d": False})
            return None
        if session.socket is not None and session.socket is not socket:
            await session.socket.close(code=INVALID_SEQ)
        session.socket, session.deflate = socket, deflate
        for missed in [e for e in session.events if e["s"] > seq]:
            await _send(socket, deflate, missed)
        await self._send_event(session, "RESUMED", {"_trace": ['["fake-discord-gateway",{"micros":0}]']})
        return session

    async def _send_event(self, session: Session, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        payload = {"op": 0, "s": session.seq, "t": event, "d": data}
        session.events.append(payload)
        if session.socket is not None and not session.socket.closed:
            await _send(session.socket, session.deflate, payload)

    def _members_chunk(self, data: dict[str, Any]) -> dict[str, Any]:
        with self._fake.lock:
            members = list(self._fake.world.members.values())
        wanted = {str(u) for u in data.get("user_ids") or []}
        query = str(data.get("query") or "").lower()
        chosen = [
            m
            for m in members
            if (not wanted or m["user"]["id"] in wanted) and m["user"]["username"].startswith(query)
        ]
        limit = int(data.get("limit") or 0)
        return {
            "guild_id": str(data.get("guild_id")),
            "members": chosen[:limit] if limit else chosen,
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": sorted(wanted - {m["user"]["id"] for m in chosen}),
            **({"nonce": data["nonce"]} if data.get("nonce") else {}),
        }


async def _send(socket: web.WebSocketResponse, deflate: Any, payload: dict[str, Any]) -> None:
    text = json.dumps(payload)
    if deflate is None:
        await socket.send_str(text)
    else:
        await socket.send_bytes(deflate.compress(text.encode()) + deflate.flush(zlib.Z_SYNC_FLUSH))


def _as_seen(message: dict[str, Any], intents: int) -> dict[str, Any]:
    """Without the MESSAGE_CONTENT intent, Discord blanks messages that do not mention the bot."""
    mentions_bot = any(m.get("id") == BOT_ID for m in message.get("mentions", []))
    if intents & INTENT_MESSAGE_CONTENT or mentions_bot or message.get("author", {}).get("id") == BOT_ID:
        return message
    shown = dict(message)
    shown.update({key: "" if key == "content" else [] for key in _HIDDEN_WITHOUT_CONTENT})
    return shown
