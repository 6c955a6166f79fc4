"""The Discord REST API as activities, tools and the Discord surface reach it.

discord.py's `HTTPClient` makes the calls: it keeps Discord's rate-limit rules (per-route
buckets from `X-RateLimit-Bucket`, waiting out `retry_after` on a 429, the global limit, retrying
a 5xx a few times), so those live in the library Discord's Python community maintains, not here.
One client per event loop, bot token and API URL (`OPENLOOP_DISCORD_API_URL`, so tests and
proxies can stand in for discord.com). A rate limit longer than `MAX_INLINE_WAIT_SECONDS` is
handed to Temporal's retry policy as a retryable error that carries the wait; errors a retry
cannot fix (a missing permission, a deleted channel) are non-retryable.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio.exceptions import ApplicationError

from config.settings import Settings
from workflows.errors import ErrorType

MAX_INLINE_WAIT_SECONDS = 30.0  # discord.py's floor for handing a long wait back
_CLIENTS: dict[tuple[int, str, str], Any] = {}
_LOCKS: dict[int, asyncio.Lock] = {}  # one per event loop: a lock belongs to the loop it waits in


class DiscordNotConfigured(RuntimeError):
    """DISCORD_BOT_TOKEN is not set."""


async def discord_http(settings: Settings) -> Any:
    """discord.py's logged-in HTTP client for this loop, token and URL (made once)."""
    from discord.http import HTTPClient, Route

    if settings.discord_bot_token is None:
        raise DiscordNotConfigured("DISCORD_BOT_TOKEN is not set: create a bot (openloop discord setup)")
    token = settings.discord_bot_token.get_secret_value()
    base = settings.discord_api_url.rstrip("/")
    loop = asyncio.get_running_loop()
    key = (id(loop), token, base)
    async with _LOCKS.setdefault(id(loop), asyncio.Lock()):
        http = _CLIENTS.get(key)
        if http is None or http._HTTPClient__session.closed:  # noqa: SLF001 - closed with its loop
            Route.BASE = base  # one Discord per process: its API URL is a class setting there
            http = HTTPClient(loop, max_ratelimit_timeout=MAX_INLINE_WAIT_SECONDS)
            try:
                await http.static_login(token)
            except BaseException:
                await http.close()  # a refused token: no session left open behind
                raise
            _CLIENTS[key] = http
    return http


async def close_discord_clients() -> None:
    """Close this loop's clients (a command that ends its loop; a worker keeps its own)."""
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _CLIENTS if k[0] == loop_id]:
        await _CLIENTS.pop(key).close()


async def discord_call(
    settings: Settings, method: str, path: str, *, json: Any = None, **parameters: Any
) -> Any:
    """One REST call: `path` as in Discord's docs with `{channel_id}`-style parameters."""
    from discord.http import Route

    http = await discord_http(settings)
    route = Route(method, path, **parameters)
    if json is None:
        return await http.request(route)
    return await http.request(route, json=json)


def http_status(exc: BaseException) -> int | None:
    return getattr(exc, "status", None)


def error_code(exc: BaseException) -> int | None:
    """Discord's JSON error code (10003 unknown channel, 50013 missing permissions, ...)."""
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def activity_error(exc: BaseException, doing: str) -> ApplicationError:
    """An activity error for a failed call: retryable for a rate limit or a server error."""
    from discord.errors import RateLimited

    if isinstance(exc, RateLimited):
        return ApplicationError(
            f"Discord rate-limited {doing}; retrying in {exc.retry_after:.0f} s",
            type=ErrorType.DISCORD_RATE_LIMITED,
            next_retry_delay=timedelta(seconds=exc.retry_after),
        )
    status = http_status(exc)
    if status is None or status >= 500 or status == 429:
        return ApplicationError(f"Discord failed {doing}: {exc}", type=ErrorType.DISCORD_UNAVAILABLE)
    return ApplicationError(
        f"Discord refused {doing}: {status} {exc}", type=ErrorType.DISCORD_API_ERROR, non_retryable=True
    )


def not_configured_error(exc: DiscordNotConfigured) -> ApplicationError:
    return ApplicationError(str(exc), type=ErrorType.TOOL_CONFIG_ERROR, non_retryable=True)
