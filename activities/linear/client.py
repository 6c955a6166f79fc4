"""Linear's GraphQL API as activities, tools and the Linear surface reach it.

A small typed layer over `httpx` (the documents are in `activities.linear.queries`), not a
GraphQL client library: we send a dozen fixed documents, and what matters is Linear's own
error shape and rate-limit headers, which a generic client hides. One POST per call, no
retries here: Temporal's retry policy owns them. A rate-limited call (HTTP 429, or an error
with `extensions.code == "RATELIMITED"`, which Linear answers with 400) is raised as
`LinearRateLimited` carrying the wait until the reset Linear's `X-RateLimit-*-Reset` headers
name (epoch milliseconds); `activity_error` turns it into a retryable error with that delay.

Credentials come from settings: the app's OAuth token (`LINEAR_ACCESS_TOKEN`, installed with
`actor=app`, sent as `Bearer`) or a personal API key (`LINEAR_API_KEY`, sent bare, as Linear
asks). `OPENLOOP_LINEAR_API_URL` points the client elsewhere (tests, a proxy).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import httpx
from temporalio.exceptions import ApplicationError

from config.settings import Settings
from workflows.errors import ErrorType

REQUEST_TIMEOUT_SECONDS = 20.0
DEFAULT_RATE_LIMIT_WAIT = 10.0  # when a rate-limited answer names no reset
MAX_RATE_LIMIT_WAIT = 3600.0  # Linear's windows are an hour at most
_RESET_HEADERS = ("X-RateLimit-Requests-Reset", "X-RateLimit-Complexity-Reset", "X-RateLimit-Endpoint-Reset")
_AUTH_CODES = ("AUTHENTICATION_ERROR", "FORBIDDEN")


class LinearNotConfigured(RuntimeError):
    """Neither LINEAR_ACCESS_TOKEN nor LINEAR_API_KEY is set."""


class LinearError(Exception):
    """Linear answered with errors (or an HTTP error); `code` is its `extensions.code`."""

    def __init__(self, message: str, *, status: int, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code

    @property
    def retryable(self) -> bool:
        return self.status >= 500 or self.code == "INTERNAL_ERROR"


class LinearRateLimited(LinearError):
    def __init__(self, message: str, wait_seconds: float) -> None:
        super().__init__(message, status=429, code="RATELIMITED")
        self.wait_seconds = wait_seconds


def authorization(settings: Settings) -> str:
    if settings.linear_access_token is not None:
        return f"Bearer {settings.linear_access_token.get_secret_value()}"
    if settings.linear_api_key is not None:
        return settings.linear_api_key.get_secret_value()  # personal API keys go bare
    raise LinearNotConfigured(
        "Linear is not configured: set LINEAR_ACCESS_TOKEN (the app's actor=app OAuth token) "
        "or LINEAR_API_KEY"
    )


def reset_wait(headers: Mapping[str, str], now: float | None = None) -> float:
    """Seconds until the latest reset Linear names (epoch ms), within sane bounds."""
    now_ms = (time.time() if now is None else now) * 1000
    resets = []
    for name in _RESET_HEADERS:
        value = headers.get(name)
        if value and value.strip().isdigit():
            resets.append(int(value.strip()))
    if not resets:
        return DEFAULT_RATE_LIMIT_WAIT
    return min(MAX_RATE_LIMIT_WAIT, max(1.0, (max(resets) - now_ms) / 1000))


async def graphql(
    settings: Settings,
    document: str,
    variables: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `data` of one GraphQL call; raises `LinearError` (or `LinearRateLimited`)."""
    headers = {"Authorization": authorization(settings), "Content-Type": "application/json"}
    body = {"query": document, "variables": variables or {}}
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_SECONDS) as http:
        response = await http.post(settings.linear_api_url, json=body, headers=headers)
    return _data_of(response)


def _data_of(response: httpx.Response) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError:
        payload = {}
    errors = payload.get("errors") if isinstance(payload, dict) else None
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    code = str((first.get("extensions") or {}).get("code") or "")
    message = str(first.get("message") or response.reason_phrase or "no answer")
    if response.status_code == 429 or code == "RATELIMITED":
        wait = reset_wait(response.headers)
        raise LinearRateLimited(f"Linear rate limit: {message}", wait)
    if response.status_code >= 400 or errors:
        raise LinearError(f"Linear {response.status_code}: {message}", status=response.status_code, code=code)
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, dict):
        raise LinearError("Linear answered without data", status=response.status_code)
    return data


def activity_error(exc: BaseException, doing: str) -> ApplicationError:
    """An activity error for a failed call: retryable after the reset for a rate limit,
    retryable for an outage, non-retryable for a refusal (auth, a bad request)."""
    if isinstance(exc, LinearRateLimited):
        return ApplicationError(
            f"Linear rate-limited {doing}; retrying in {exc.wait_seconds:.0f} s",
            type=ErrorType.LINEAR_RATE_LIMITED,
            next_retry_delay=timedelta(seconds=exc.wait_seconds),
        )
    if isinstance(exc, LinearNotConfigured):
        return ApplicationError(str(exc), type=ErrorType.TOOL_CONFIG_ERROR, non_retryable=True)
    if isinstance(exc, httpx.HTTPError) or (isinstance(exc, LinearError) and exc.retryable):
        return ApplicationError(f"Linear failed {doing}: {exc}", type=ErrorType.LINEAR_UNAVAILABLE)
    return ApplicationError(
        f"Linear refused {doing}: {exc}", type=ErrorType.LINEAR_API_ERROR, non_retryable=True
    )


def refused_auth(exc: LinearError) -> bool:
    return exc.status in (401, 403) or exc.code in _AUTH_CODES
