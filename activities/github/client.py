"""What every GitHub activity shares: the PyGithub client, error mapping and text hygiene.

- `github_call(settings, repo, fn)` builds (or reuses) a `Github` for the repository and runs
  the blocking PyGithub code `fn(gh)` in a thread, so the event loop never blocks. The client
  points at `settings.github_api_url` (GitHub.com, GitHub Enterprise Server, or a local test
  server) and authenticates with GITHUB_TOKEN or as a GitHub App installation (PyGithub's
  AppInstallationAuth refreshes the installation token before it expires).
- PyGithub's own retries are off: Temporal's activity retry policy owns retries. Errors are
  mapped here: rate limits (429, 403 with Retry-After or an exhausted quota) and 5xx become
  retryable ApplicationErrors, with `next_retry_delay` taken from Retry-After; 404/422 and
  other client errors become `ToolError`s the model hears about.
- `strip_hidden` removes content a reader of the rendered page cannot see (HTML comments,
  invisible characters) before it reaches a model; `marker` is the hidden idempotency marker.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
import unicodedata
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException, GithubIntegration
from temporalio.exceptions import ApplicationError

from activities.tool_errors import ToolError, ToolErrorKind
from config.settings import Settings
from workflows.errors import ErrorType

T = TypeVar("T")

# Well below the tool (2 min) and surface (30 s) activity timeouts, so an attempt's HTTP call
# has always ended, client-side, before Temporal starts the next attempt.
REQUEST_TIMEOUT_SECONDS: int = 10  # PyGithub takes whole seconds
# GitHub asks integrations to wait at least a minute after a secondary rate limit without
# Retry-After; a primary-limit reset is honoured up to an hour.
SECONDARY_LIMIT_DELAY = timedelta(seconds=60)
MAX_RATE_LIMIT_DELAY = timedelta(hours=1)
POOL_SIZE = 10

_clients: dict[tuple[object, ...], Github] = {}
_installations: dict[tuple[str, str], int] = {}
_lock = threading.Lock()


def _private_key(value: str) -> str:
    """The App private key: PEM text (literal `\\n` allowed, as env files write it) or a path."""
    text = value.replace("\\n", "\n").strip()
    if text.startswith("-----BEGIN"):
        return text + "\n"
    return Path(text).expanduser().read_text()


def _options(settings: Settings) -> dict[str, Any]:
    return {
        "base_url": settings.github_api_url.rstrip("/"),
        "timeout": REQUEST_TIMEOUT_SECONDS,
        "retry": None,  # Temporal's activity retry policy owns retries
        "pool_size": POOL_SIZE,
        # No client-side sleeping between requests: rate limits come back as errors with
        # Retry-After, and Temporal waits that long (durably) before the next attempt.
        "seconds_between_requests": None,
        "seconds_between_writes": None,
    }


def github_for(settings: Settings, repo: str) -> Github:
    """A `Github` client allowed to act on `repo` ("owner/name"); blocking, call in a thread."""
    options = _options(settings)
    if settings.github_app_id and settings.github_app_private_key:
        app_auth = Auth.AppAuth(
            settings.github_app_id, _private_key(settings.github_app_private_key.get_secret_value())
        )
        installation = _installation_id(settings, app_auth, repo, options)
        key: tuple[object, ...] = ("app", settings.github_app_id, installation, *options.values())
        with _lock:
            if key not in _clients:
                _clients[key] = Github(
                    auth=app_auth.get_installation_auth(installation), lazy=True, **options
                )
            return _clients[key]
    if settings.github_token is None:
        raise ApplicationError(
            "GitHub is not configured: set GITHUB_TOKEN (a fine-grained token) or "
            "GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY (a GitHub App)",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    token = settings.github_token.get_secret_value()
    fingerprint = hashlib.sha256(token.encode()).hexdigest()
    key = ("token", fingerprint, *options.values())
    with _lock:
        if key not in _clients:
            _clients[key] = Github(auth=Auth.Token(token), lazy=True, **options)
        return _clients[key]


def installation_token(settings: Settings, repo: str) -> str | None:
    """A token git can clone `repo` with: the App's installation token when an App is
    configured (its pushes trigger CI), else the configured token; blocking."""
    if settings.github_app_id and settings.github_app_private_key:
        app_auth = Auth.AppAuth(
            settings.github_app_id, _private_key(settings.github_app_private_key.get_secret_value())
        )
        options = _options(settings)
        installation = _installation_id(settings, app_auth, repo, options)
        integration = GithubIntegration(auth=app_auth, base_url=options["base_url"], retry=None)
        return integration.get_access_token(installation).token
    return settings.github_token.get_secret_value() if settings.github_token else None


def _installation_id(settings: Settings, app_auth: Auth.AppAuth, repo: str, options: dict[str, Any]) -> int:
    cache_key = (settings.github_api_url, repo.lower())
    with _lock:
        cached = _installations.get(cache_key)
    if cached is not None:
        return cached
    owner, name = repo.split("/", 1)
    integration = GithubIntegration(
        auth=app_auth,
        base_url=options["base_url"],
        timeout=options["timeout"],
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    installation = integration.get_repo_installation(owner, name).id
    with _lock:
        _installations[cache_key] = installation
    return installation


def reset_clients() -> None:
    """Forget cached clients (settings changed, e.g. between tests)."""
    with _lock:
        _clients.clear()
        _installations.clear()


async def github_call(settings: Settings, repo: str, fn: Callable[[Github], T]) -> T:
    """Run blocking PyGithub code for `repo` in a thread, with GitHub's errors mapped."""

    def run() -> T:
        return fn(github_for(settings, repo))

    try:
        return await asyncio.to_thread(run)
    except GithubException as exc:
        raise map_github_error(exc, repo) from exc
    except requests.exceptions.Timeout as exc:
        raise ApplicationError(
            f"GitHub did not answer within {REQUEST_TIMEOUT_SECONDS:g}s ({repo})",
            type=ErrorType.GITHUB_TIMEOUT,
        ) from exc
    except requests.exceptions.RequestException as exc:
        raise ApplicationError(
            f"could not reach GitHub at {settings.github_api_url}: {type(exc).__name__}",
            type=ErrorType.GITHUB_UNAVAILABLE,
        ) from exc


def _header(headers: dict[str, Any] | None, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return str(value)
    return None


def _message(exc: GithubException) -> str:
    data = exc.data if isinstance(exc.data, dict) else {}
    message = str(data.get("message") or exc.message or "").strip()
    details = [
        str(e.get("message") or f"{e.get('field', '')} {e.get('code', '')}".strip())
        for e in data.get("errors") or []
        if isinstance(e, dict)
    ]
    return "; ".join([m for m in [message, *details] if m]) or f"HTTP {exc.status}"


def rate_limit_delay(status: int, headers: dict[str, Any] | None, message: str) -> timedelta | None:
    """How long GitHub asks us to wait, or None when the response is not a rate limit."""
    retry_after = _header(headers, "retry-after")
    remaining = _header(headers, "x-ratelimit-remaining")
    limited = status == 429 or (
        status == 403 and (retry_after is not None or remaining == "0" or "rate limit" in message.lower())
    )
    if not limited:
        return None
    if retry_after is not None and retry_after.strip().isdigit():
        delay = timedelta(seconds=int(retry_after.strip()))
    elif remaining == "0" and (reset := _header(headers, "x-ratelimit-reset")) and reset.isdigit():
        delay = timedelta(seconds=max(1, int(reset) - int(time.time()) + 1))
    else:
        delay = SECONDARY_LIMIT_DELAY
    return min(delay, MAX_RATE_LIMIT_DELAY)


def map_github_error(exc: GithubException, repo: str) -> Exception:
    """A GitHub error response as the exception Temporal (or the model) should see."""
    status = int(exc.status or 0)
    message = _message(exc)
    delay = rate_limit_delay(status, exc.headers, message)
    if delay is not None:
        return ApplicationError(
            f"GitHub rate limit on {repo}: {message}; retrying in {delay.total_seconds():g}s",
            type=ErrorType.GITHUB_RATE_LIMITED,
            next_retry_delay=delay,
        )
    if status >= 500 or status == 0:
        return ApplicationError(
            f"GitHub server error {status} on {repo}: {message}", type=ErrorType.GITHUB_SERVER_ERROR
        )
    if status == 401:
        return ApplicationError(
            f"GitHub rejected the credentials (401): {message}. Check GITHUB_TOKEN or the App key",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    if status == 403:
        return ToolError(ToolErrorKind.PERMISSION, f"GitHub refused access to {repo} (403): {message}")
    if status in (404, 410):
        return ToolError(ToolErrorKind.NOT_FOUND, f"not found on GitHub ({repo}, {status}): {message}")
    return ToolError(ToolErrorKind.INVALID, f"GitHub rejected the request ({repo}, {status}): {message}")


def check_repo(repo: object) -> str:
    """`owner/name`, or a ToolError the model can act on."""
    text = str(repo or "").strip().strip("/")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}", text):
        raise ToolError(
            ToolErrorKind.INVALID, f"{repo!r} is not a repository; write owner/name, e.g. acme/api"
        )
    return text


# Text hygiene ------------------------------------------------------------------------------

MARKER_PREFIX = "<!-- openloop:"
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
# `[//]: # (note)` and `[x]: <> "note"`: link definitions used as invisible markdown comments.
_MD_COMMENT = re.compile(
    r"^[ \t]{0,3}\[[^\]\n]*\]:[ \t]*(?:#|<>)(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?[ \t]*$",
    re.M,
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_BLANKS = re.compile(r"\n{3,}")


def _invisible(ch: str) -> bool:
    if ch in "\n\t":
        return False
    category = unicodedata.category(ch)
    # Cf: zero-width characters, bidi overrides, tag characters (ASCII smuggling), soft hyphen.
    if category in ("Cf", "Cc", "Co", "Cn"):
        return True
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF  # variation selectors


def strip_hidden(text: str) -> str:
    """What a reader of the rendered comment sees: no HTML comments, no invisible characters."""
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    text = _HTML_COMMENT.sub("", text)
    text = _MD_COMMENT.sub("", text)
    text = "".join(ch for ch in text if not _invisible(ch))
    return _BLANKS.sub("\n\n", text).strip()


def marker(key: str) -> str:
    """A hidden marker naming an idempotency key (hashed: keys may hold any characters)."""
    return f"{MARKER_PREFIX}key={hashlib.sha256(key.encode()).hexdigest()[:32]} -->"


def with_marker(body: str, key: str) -> str:
    return f"{body.rstrip()}\n\n{marker(key)}"


def bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 20].rstrip() + "\n… (truncated)"
