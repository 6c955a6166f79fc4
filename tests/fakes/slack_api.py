"""A local stand-in for the Slack Web API (and Socket Mode), for tests.

A real HTTP server on 127.0.0.1 (aiohttp, in its own thread) that speaks Slack's wire format:
`/api/<method>` with a bearer token, form, query or JSON arguments, `{"ok": ...}` bodies,
cursor pagination in `response_metadata.next_cursor`, message metadata returned only with
`include_all_metadata`, and HTTP 429 with Retry-After when told to. slack-sdk's real
`WebClient` / `AsyncWebClient` talk to it through `base_url`. It records every call.

Socket Mode: `apps.connections.open` hands out a ws:// URL on the same server; tests push
envelopes with `socket_send` and read the client's acks in `socket_acks`.

Files (`files_upload_v2`): `files.getUploadURLExternal` hands out an upload URL on the same
server, the bytes are posted there, and `files.completeUploadExternal` shares them in a
channel or thread as a message with `files`; tests read them in `uploaded_files`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.slack_directory import SlackDirectory
from tests.fakes.slack_streaming import SlackStreaming

BOT_USER = "UOPENLOOP"
BOT_ID = "BOPENLOOP"
TEAM = "T0FAKE"
APP_ID = "A0FAKE"


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    status: int = 200
    at: float = field(default_factory=time.monotonic)  # when it arrived (benches time the thread)


@dataclass
class _State:
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    usergroup_handles: dict[str, str] = field(default_factory=dict)
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    reactions: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    ephemerals: list[dict[str, Any]] = field(default_factory=list)
    rate_limits: dict[str, list[int]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)


def _truthy(value: Any) -> bool:
    return value in (True, 1, "1", "true", "True")


class FakeSlack:
    def __init__(
        self, token: str = "xoxb-test-token", app_token: str = "xapp-test-token", page_size: int | None = None
    ):
        self.token = token
        self.app_token = app_token
        self.page_size = page_size  # caps `limit`, so tests see several pages
        self.calls: list[Call] = []
        self.socket_acks: list[dict[str, Any]] = []
        self._state = _State()
        self._lock = threading.Lock()
        self._clock = int(time.time())
        self._seq = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._sockets: list[web.WebSocketResponse] = []
        self._thread: threading.Thread | None = None
        self.port = 0
        self.streaming = SlackStreaming(self)  # chat.*Stream, assistant.threads.setStatus
        self.directory = SlackDirectory(self)  # views.publish, conversations.info, renames
        self.add_user(BOT_USER, "openloop", "OpenLoop", is_bot=True)

    # Lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def start(self) -> FakeSlack:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._start_site())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="fake-slack", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Slack server did not start")
        return self

    async def _start_site(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link/", self._socket)
        app.router.add_post("/upload/{file_id}", self._upload)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            for socket in list(self._sockets):
                await socket.close()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Test controls -----------------------------------------------------------------------

    def _next_ts(self) -> str:
        self._seq += 1
        return f"{self._clock}.{self._seq:06d}"

    def add_user(
        self, user_id: str, name: str, real_name: str = "", *, display_name: str = "", is_bot: bool = False
    ) -> None:
        with self._lock:
            self._state.users[user_id] = {
                "id": user_id,
                "team_id": TEAM,
                "name": name,
                "real_name": real_name or name,
                "is_bot": is_bot,
                "deleted": False,
                "profile": {"real_name": real_name or name, "display_name": display_name},
            }

    def set_usergroup(self, group_id: str, users: list[str], handle: str = "") -> None:
        with self._lock:
            self._state.usergroups[group_id] = list(users)
            if handle:
                self._state.usergroup_handles[group_id] = handle

    def add_channel(
        self, channel_id: str, name: str, *, is_private: bool = False, archived: bool = False
    ) -> None:
        """A channel `conversations.list` shows (messages need no channel added first)."""
        with self._lock:
            self._state.channels[channel_id] = {
                "id": channel_id,
                "name": name,
                "is_channel": True,
                "is_private": is_private,
                "is_archived": archived,
            }

    def add_message(
        self,
        channel: str,
        text: str,
        *,
        user: str | None = None,
        thread_ts: str | None = None,
        bot_id: str | None = None,
    ) -> str:
        with self._lock:
            return self._store(channel, {"user": user, "bot_id": bot_id, "text": text}, thread_ts)

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        """Answer the next `times` calls of `method` with HTTP 429 and Retry-After."""
        with self._lock:
            self._state.rate_limits[method] = [times, retry_after]

    def fail_next(self, method: str, error: str, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with `{"ok": false, "error": error}`."""
        with self._lock:
            self._state.failures[method] = [error] * times

    def delete_message(self, channel: str, ts: str) -> None:
        with self._lock:
            self._state.messages[channel] = [
                m for m in self._state.messages.get(channel, []) if m["ts"] != ts
            ]

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        return [c.args for c in self.calls if c.method == method and c.status == 200]

    def thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(m) for m in self._thread_of(channel, thread_ts)]

    def reactions(self, channel: str, ts: str) -> list[str]:
        with self._lock:
            return list(self._state.reactions.get((channel, ts), []))

    @property
    def ephemerals(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._state.ephemerals)

    def socket_send(self, envelope: dict[str, Any]) -> None:
        """Push one Socket Mode envelope to every connected client."""
        assert self._loop is not None

        async def send() -> None:
            for socket in list(self._sockets):
                await socket.send_str(json.dumps(envelope))

        asyncio.run_coroutine_threadsafe(send(), self._loop).result(10)

    @property
    def uploaded_files(self) -> list[dict[str, Any]]:
        """Files shared by `files.completeUploadExternal`: id, name, title, content (bytes),
        channel, thread_ts."""
        with self._lock:
            return [dict(f) for f in self._state.files.values() if f.get("channel")]

    @property
    def socket_connected(self) -> bool:
        return bool(self._sockets)

    # Message store (call with the lock held) ----------------------------------------------

    def _store(self, channel: str, fields: dict[str, Any], thread_ts: str | None) -> str:
        ts = self._next_ts()
        message = {
            "type": "message",
            "ts": ts,
            "team": TEAM,
            **{k: v for k, v in fields.items() if v is not None},
        }
        if thread_ts:
            message["thread_ts"] = thread_ts
            parent = self._find(channel, thread_ts)
            if parent is not None:
                parent["thread_ts"] = thread_ts
                parent["reply_count"] = parent.get("reply_count", 0) + 1
        self._state.messages.setdefault(channel, []).append(message)
        return ts

    def _find(self, channel: str, ts: str) -> dict[str, Any] | None:
        return next((m for m in self._state.messages.get(channel, []) if m["ts"] == ts), None)

    def _thread_of(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self._state.messages.get(channel, [])
            if m["ts"] == thread_ts or m.get("thread_ts") == thread_ts
        ]

    # HTTP ---------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            args.update(await request.json())
        elif request.can_read_body:
            args.update(dict(await request.post()))
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() or str(args.pop("token", ""))
        with self._lock:
            limited = self._state.rate_limits.get(method)
            if limited and limited[0] > 0:
                limited[0] -= 1
                self.calls.append(Call(method, args, 429))
                return web.json_response(
                    {"ok": False, "error": "ratelimited"},
                    status=429,
                    headers={"Retry-After": str(limited[1])},
                )
            self.calls.append(Call(method, args))
            expected = self.app_token if method == "apps.connections.open" else self.token
            if token != expected:
                return web.json_response({"ok": False, "error": "invalid_auth"})
            failures = self._state.failures.get(method)
            if failures:
                return web.json_response({"ok": False, "error": failures.pop()})
            body = self._handle(method, args)
        return web.json_response(body)

    def _handle(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, "_m_" + method.replace(".", "_"), None) or self.streaming.handler(method)
        handler = handler or self.directory.handler(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        result: dict[str, Any] = handler(args)
        return result

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://fake.slack.test/",
            "team": "Fake",
            "user": "openloop",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _bot_fields(self) -> dict[str, Any]:
        return {
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "bot_profile": {"id": BOT_ID, "name": "openloop", "app_id": APP_ID},
        }

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, text, blocks = args.get("channel"), args.get("text"), args.get("blocks")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not text and not blocks:
            return {"ok": False, "error": "no_text"}
        fields = {
            **self._bot_fields(),
            "text": text or "",
            "blocks": _json(blocks),
            "metadata": _json(args.get("metadata")),
        }
        ts = self._store(channel, fields, args.get("thread_ts") or None)
        message = self._find(channel, ts)
        return {"ok": True, "channel": channel, "ts": ts, "message": _public(message, True)}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self._find(str(args.get("channel")), str(args.get("ts")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if "text" in args:
            message["text"] = args["text"]
        if "blocks" in args:
            message["blocks"] = _json(args["blocks"])
        if "metadata" in args:
            message["metadata"] = _json(args["metadata"])
        message["edited"] = {"user": BOT_USER, "ts": self._next_ts()}
        return {
            "ok": True,
            "channel": args["channel"],
            "ts": message["ts"],
            "text": message.get("text", ""),
            "message": _public(message, True),
        }

    def _m_chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(args.get("channel")), str(args.get("ts"))
        if self._find(channel, ts) is None:
            return {"ok": False, "error": "message_not_found"}
        self._state.messages[channel] = [m for m in self._state.messages[channel] if m["ts"] != ts]
        return {"ok": True, "channel": channel, "ts": ts}

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel") or not args.get("user"):
            return {"ok": False, "error": "invalid_arguments"}
        ts = self._next_ts()
        self._state.ephemerals.append({**args, "message_ts": ts})
        return {"ok": True, "message_ts": ts}

    def _page(
        self, items: list[dict[str, Any]], args: dict[str, Any], key: str = "messages"
    ) -> dict[str, Any]:
        limit = int(args.get("limit") or 100)
        if self.page_size:
            limit = min(limit, self.page_size)
        cursor = str(args.get("cursor") or "")
        start = int(base64.b64decode(cursor).decode().split(":")[1]) if cursor else 0
        page = items[start : start + limit]
        more = start + limit < len(items)
        next_cursor = base64.b64encode(f"next:{start + limit}".encode()).decode() if more else ""
        with_metadata = _truthy(args.get("include_all_metadata"))
        return {
            "ok": True,
            key: [_public(m, with_metadata) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": next_cursor},
        }

    def _m_conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        thread = self._thread_of(str(args.get("channel")), str(args.get("ts")))
        if not thread:
            return {"ok": False, "error": "thread_not_found"}
        return self._page(sorted(thread, key=lambda m: m["ts"]), args)

    def _m_conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        top = [
            m
            for m in self._state.messages.get(str(args.get("channel")), [])
            if m.get("thread_ts") in (None, m["ts"])
        ]
        return self._page(sorted(top, key=lambda m: m["ts"], reverse=True), args)

    def _m_users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = self._state.users.get(str(args.get("user")))
        return {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}

    def _m_conversations_list(self, args: dict[str, Any]) -> dict[str, Any]:
        types = str(args.get("types") or "public_channel").split(",")
        shown = [
            c
            for c in self._state.channels.values()
            if ("private_channel" if c["is_private"] else "public_channel") in types
            and not (c["is_archived"] and _truthy(args.get("exclude_archived")))
        ]
        return self._page(sorted(shown, key=lambda c: c["id"]), args, "channels")

    def _m_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        return self._page(sorted(self._state.users.values(), key=lambda u: u["id"]), args, "members")

    def _m_usergroups_list(self, args: dict[str, Any]) -> dict[str, Any]:
        groups = [
            {
                "id": group_id,
                "team_id": TEAM,
                "handle": self._state.usergroup_handles.get(group_id, group_id.lower()),
                "date_delete": 0,
                **({"users": users} if _truthy(args.get("include_users")) else {}),
            }
            for group_id, users in sorted(self._state.usergroups.items())
        ]
        return {"ok": True, "usergroups": groups}

    def _m_usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        users = self._state.usergroups.get(str(args.get("usergroup")))
        return (
            {"ok": True, "users": users} if users is not None else {"ok": False, "error": "no_such_subteam"}
        )

    def _m_reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (str(args.get("channel")), str(args.get("timestamp")))
        if self._find(*key) is None:
            return {"ok": False, "error": "message_not_found"}
        names = self._state.reactions.setdefault(key, [])
        if args.get("name") in names:
            return {"ok": False, "error": "already_reacted"}
        names.append(str(args.get("name")))
        return {"ok": True}

    def _m_reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (str(args.get("channel")), str(args.get("timestamp")))
        names = self._state.reactions.get(key, [])
        if args.get("name") not in names:
            return {"ok": False, "error": "no_reaction"}
        names.remove(str(args.get("name")))
        return {"ok": True}

    def _m_files_getUploadURLExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("filename") or not str(args.get("length") or "").isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{len(self._state.files) + 1:08d}"
        self._state.files[file_id] = {"id": file_id, "name": args["filename"], "length": int(args["length"])}
        return {
            "ok": True,
            "file_id": file_id,
            "upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}",
        }

    def _m_files_completeUploadExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        wanted = _json(args.get("files"))
        if not isinstance(wanted, list) or not wanted:
            return {"ok": False, "error": "invalid_arguments"}
        shared = []
        for item in wanted:
            found = self._state.files.get(str(item.get("id")))
            if found is None or "content" not in found:
                return {"ok": False, "error": "file_not_found"}
            found["title"] = item.get("title") or found["name"]
            shared.append({k: found[k] for k in ("id", "name", "title")})
        channel = args.get("channel_id")
        if channel:
            thread = args.get("thread_ts") or None
            fields = {**self._bot_fields(), "text": args.get("initial_comment") or "", "files": shared}
            self._store(str(channel), fields, thread)
            for item in shared:
                self._state.files[item["id"]].update(channel=channel, thread_ts=thread)
        return {"ok": True, "files": shared}

    def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link/?ticket=fake-ticket"}

    async def _upload(self, request: web.Request) -> web.Response:
        content = await request.read()
        with self._lock:
            found = self._state.files.get(request.match_info["file_id"])
            if found is None:
                return web.Response(status=404, text="unknown upload")
            found["content"] = content
        return web.Response(text=f"OK - {len(content)}")

    # Socket Mode ---------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._sockets.append(socket)
        await socket.send_str(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": 1,
                    "connection_info": {"app_id": APP_ID},
                    "debug_info": {"host": "fake-slack", "approximate_connection_time": 3600},
                }
            )
        )
        try:
            async for message in socket:
                if message.type == WSMsgType.TEXT:
                    with self._lock:
                        self.socket_acks.append(json.loads(message.data))
        finally:
            self._sockets.remove(socket)
        return socket


def _json(value: Any) -> Any:
    """Form-encoded arguments arrive as JSON text; JSON bodies arrive parsed."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _public(message: dict[str, Any] | None, with_metadata: bool) -> dict[str, Any]:
    if message is None:
        return {}
    shown = {k: v for k, v in message.items() if v is not None}
    if not with_metadata:
        shown.pop("metadata", None)
    return shown
