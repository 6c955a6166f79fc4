"""How the fake Discord answers over HTTP: JSON bodies typed exactly `application/json` (discord.py
reads anything else, even with `; charset=utf-8`, as text), Discord's documented error codes
(10003 Unknown Channel, 10008 Unknown Message, 50006 Cannot send an empty message, 50035 Invalid
Form Body ...), the checks Discord makes on a message body, and the rate-limit headers every
answer carries. Shared by the server and the route modules.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tests.fakes.discord_objects import now_iso

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
BODY: web.RequestKey[Any] = web.RequestKey(
    "body", object
)  # the parsed JSON body, set by the server's middleware
MAX_CONTENT = 2000
_USER_MENTION = re.compile(r"<@!?(\d+)>")


def reply(body: Any, status: int = 200) -> web.Response:
    """Discord's answer: exactly `application/json` (no charset), or 204 with no body."""
    if body is None:
        return web.Response(status=204)
    return web.Response(body=json.dumps(body).encode(), status=status, content_type="application/json")


def error(status: int, code: int, text: str, **extra: Any) -> web.Response:
    return reply({"message": text, "code": code, **extra}, status)


def unknown(what: str) -> web.Response:
    codes = {"Channel": 10003, "Guild": 10004, "Member": 10007, "Message": 10008, "User": 10013}
    return error(404, codes[what], f"Unknown {what}")


def invalid_form(field: str, code: str, text: str) -> web.Response:
    errors = {field: {"_errors": [{"code": code, "message": text}]}}
    return error(400, 50035, "Invalid Form Body", errors=errors)


def check_message_body(body: Any) -> web.Response | None:
    """Discord's own refusals of a message body, or None when it is acceptable."""
    if not isinstance(body, dict):
        return error(400, 50109, "The request body contains invalid JSON.")
    if not (body.get("content") or body.get("embeds") or body.get("components") or body.get("sticker_ids")):
        return error(400, 50006, "Cannot send an empty message")
    if len(str(body.get("content") or "")) > MAX_CONTENT:
        return invalid_form("content", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CONTENT} or fewer in length.")
    return None


def mentions(users: dict[str, dict[str, Any]], content: str, allowed: Any) -> list[dict[str, Any]]:
    """The users a message pings: `<@id>` in its content, filtered by `allowed_mentions`."""
    named = [uid for uid in _USER_MENTION.findall(content) if uid in users]
    if isinstance(allowed, dict):
        permitted = set(allowed.get("users") or []) | (
            set(named) if "users" in allowed.get("parse", []) else set()
        )
        named = [uid for uid in named if uid in permitted]
    return [users[uid] for uid in dict.fromkeys(named)]


def apply_edit(world_users: dict[str, dict[str, Any]], shown: dict[str, Any], body: dict[str, Any]) -> None:
    for key in ("content", "embeds", "components", "attachments", "flags"):
        if key in body and body[key] is not None:
            shown[key] = body[key]
    if "content" in body:
        shown["mentions"] = mentions(world_users, shown["content"], body.get("allowed_mentions"))
    shown["edited_timestamp"] = now_iso()


# Reported per bucket and window; generous so a test never waits on them (Discord's own
# limit for posting messages is 5 per 5 seconds per channel). Only a told limit answers 429.
BUCKET_LIMIT = 50
BUCKET_WINDOW_SECONDS = 1.0


class Buckets:
    """Discord's per-route rate-limit buckets (call with the server's lock held)."""

    def __init__(self) -> None:
        self.told: list[list[Any]] = []  # [method, path prefix, times left, retry_after]
        self._windows: dict[str, list[float]] = {}  # bucket:major parameter -> [start, count]

    def take(self, method: str, path: str) -> float | None:
        """The retry_after of a told 429 this request uses up, or None."""
        for told in self.told:
            if told[0] == method and path.startswith(told[1]) and told[2] > 0:
                told[2] -= 1
                return float(told[3])
        return None

    def headers(self, request: web.Request, limited: float | None) -> dict[str, str]:
        # The bucket hash is opaque and per route; windows are per major parameter.
        route = request.match_info.route.resource
        template = route.canonical if route is not None else request.path
        bucket = hashlib.sha1(f"{request.method} {template}".encode()).hexdigest()[:32]
        info = request.match_info
        key = f"{bucket}:{info.get('channel_id') or info.get('guild_id') or info.get('token') or ''}"
        now = time.time()
        window = self._windows.get(key)
        if window is None or now >= window[0] + BUCKET_WINDOW_SECONDS:
            window = self._windows[key] = [now, 0]
        window[1] += 1
        reset_after = limited if limited is not None else window[0] + BUCKET_WINDOW_SECONDS - now
        remaining = 0 if limited is not None else max(BUCKET_LIMIT - int(window[1]), 0)
        shown = {
            "X-RateLimit-Limit": str(BUCKET_LIMIT),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": f"{now + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": bucket,
            # discord.py treats a 429 without Via as a Cloudflare ban and gives up.
            "Via": "1.1 google",
        }
        if limited is not None:
            shown.update({"Retry-After": str(math.ceil(limited)), "X-RateLimit-Scope": "user"})
        return shown
