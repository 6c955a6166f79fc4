"""The Slack Web API client every Slack activity, tool and surface handler uses.

One factory builds slack-sdk's `AsyncWebClient` from settings: the bot token
(`SLACK_BOT_TOKEN`), the base URL (`OPENLOOP_SLACK_API_URL`, so tests and proxies can stand
in for slack.com) and slack-sdk's own retry handlers with a small maximum. A 429 whose
Retry-After is short is waited out in place; a longer one surfaces as a retryable
`ApplicationError` carrying Retry-After as the next retry delay, so Temporal's retry policy
(which has a maximum) owns the long waits. Errors that retrying cannot fix are non-retryable.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from temporalio.exceptions import ApplicationError

from config.settings import Settings
from workflows.errors import ErrorType

REQUEST_TIMEOUT_SECONDS = 10
MAX_RATE_LIMIT_RETRIES = 2
MAX_CONNECTION_RETRIES = 2
# A 429 asking for a longer pause than this is handed to Temporal's retry policy instead of
# holding the activity (or a webhook handler) asleep.
MAX_INLINE_RETRY_AFTER_SECONDS = 5

# Slack errors that a retry may fix; every other `ok: false` error is permanent.
RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


class SlackNotConfigured(RuntimeError):
    """A Slack credential or setting is missing."""


class ShortRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """slack-sdk's 429 handler (honours Retry-After), limited to short pauses."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        return retry_after_seconds(response.headers) <= MAX_INLINE_RETRY_AFTER_SECONDS


def retry_after_seconds(headers: Mapping[str, list[str] | str] | None) -> int:
    """Retry-After in whole seconds (1 when absent or unreadable)."""
    for key, value in (headers or {}).items():
        if key.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return max(0, int(str(raw).strip()))
            except ValueError:
                return 1
    return 1


def retry_handlers() -> list[AsyncRetryHandler]:
    return [
        ShortRateLimitRetryHandler(max_retry_count=MAX_RATE_LIMIT_RETRIES),
        AsyncConnectionErrorRetryHandler(max_retry_count=MAX_CONNECTION_RETRIES),
    ]


def bot_client(settings: Settings) -> AsyncWebClient:
    """A Web API client with the bot token; raises SlackNotConfigured when it is unset."""
    if settings.slack_bot_token is None:
        raise SlackNotConfigured(
            "SLACK_BOT_TOKEN is not set: create a Slack app, install it to the workspace and "
            "set SLACK_BOT_TOKEN to its bot token (xoxb-...)"
        )
    return AsyncWebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.slack_api_url,
        timeout=REQUEST_TIMEOUT_SECONDS,
        retry_handlers=retry_handlers(),
    )


def error_code(exc: SlackApiError) -> str:
    data = getattr(exc.response, "data", None)
    if isinstance(data, dict):
        return str(data.get("error") or "unknown_error")
    return "unknown_error"


def is_retryable(exc: SlackApiError) -> bool:
    return (
        exc.response.status_code == 429
        or exc.response.status_code >= 500
        or (error_code(exc) in RETRYABLE_ERRORS)
    )


def activity_error(exc: SlackApiError, doing: str) -> ApplicationError:
    """A SlackApiError as Temporal should see it: retryable (with Retry-After) or not."""
    code = error_code(exc)
    message = f"Slack {doing} failed: {code}"
    if exc.response.status_code == 429 or code == "ratelimited":
        delay = retry_after_seconds(exc.response.headers)
        return ApplicationError(
            message, type=ErrorType.SLACK_RATE_LIMITED, next_retry_delay=timedelta(seconds=max(1, delay))
        )
    if is_retryable(exc):
        return ApplicationError(message, type=ErrorType.SLACK_UNAVAILABLE)
    return ApplicationError(message, type=ErrorType.SLACK_API_ERROR, non_retryable=True)


def not_configured_error(exc: SlackNotConfigured) -> ApplicationError:
    return ApplicationError(str(exc), type=ErrorType.TOOL_CONFIG_ERROR, non_retryable=True)


# Reading back what we posted -------------------------------------------------------------
# Posts carry Slack message metadata (event_type + payload). Before posting again on a
# retry, an activity looks for its own earlier post in the thread, so a retry never posts
# the same thing twice.

THREAD_PAGE_SIZE = 200


async def thread_messages(
    client: AsyncWebClient, channel: str, thread_ts: str, *, with_metadata: bool = True
) -> list[dict[str, Any]]:
    """Every message of a thread, all pages (slack-sdk follows next_cursor)."""
    messages: list[dict[str, Any]] = []
    first = await client.conversations_replies(
        channel=channel, ts=thread_ts, limit=THREAD_PAGE_SIZE, include_all_metadata=with_metadata
    )
    async for page in first:
        messages.extend(page.get("messages") or [])
    return messages


async def recent_channel_messages(
    client: AsyncWebClient, channel: str, limit: int = 100
) -> list[dict[str, Any]]:
    """The latest top-level messages of a channel, with metadata (one page is enough here)."""
    response = await client.conversations_history(channel=channel, limit=limit, include_all_metadata=True)
    return list(response.get("messages") or [])


def find_posted(messages: list[dict[str, Any]], event_type: str, **payload: object) -> dict[str, Any] | None:
    """The message whose metadata has `event_type` and includes every `payload` item."""
    for message in messages:
        metadata = message.get("metadata") or {}
        if metadata.get("event_type") != event_type:
            continue
        found = metadata.get("event_payload") or {}
        if all(found.get(key) == value for key, value in payload.items()):
            return message
    return None


def metadata(event_type: str, **payload: object) -> dict[str, object]:
    return {"event_type": event_type, "event_payload": payload}
