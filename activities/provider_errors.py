"""A provider's errors, classified for Temporal: which to retry, after how long, and which
no retry can fix (a missing or refused key, an unknown model, a request the provider refuses).
"""

from __future__ import annotations

import re
from datetime import timedelta

from temporalio.exceptions import ApplicationError

from workflows.errors import ErrorType


def provider_of(model: str) -> str:
    """LiteLLM's provider for `model` (`openai`, `anthropic`, `ollama_chat`…); the prefix when
    LiteLLM cannot tell."""
    import litellm

    try:
        return str(litellm.get_llm_provider(model)[1])
    except Exception:  # noqa: BLE001 - LiteLLM raises plain errors for names it cannot place
        return model.split("/", 1)[0]


def _retry_after(exc: Exception) -> float | None:
    """Seconds the provider asked us to wait (Retry-After or retry-after-ms), if it said."""
    response = getattr(exc, "response", None)
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(exc, "headers", None),
        getattr(response, "headers", None) if response is not None else None,
    ):
        if not headers:
            continue
        millis = headers.get("retry-after-ms")
        seconds = headers.get("retry-after") or headers.get("Retry-After")
        try:
            if millis is not None:
                return max(0.0, float(millis) / 1000)
            if seconds is not None:
                return max(0.0, float(seconds))
        except ValueError:
            continue
    return None


def key_variable(model: str) -> str:
    """The environment variable holding the provider key for `model`, e.g. OPENAI_API_KEY."""
    return f"{provider_of(model).upper()}_API_KEY"


_MISSING_KEY = re.compile(
    r"missing (credentials|[\w ]{0,20}api[ _]?key)|api[ _]?key (is )?(not set|missing|required)", re.I
)


def _missing_credentials(exc: Exception) -> bool:
    """The provider was never asked: the client found no key to send."""
    return bool(_MISSING_KEY.search(str(exc)[:500]))


def classify_error(model: str, exc: Exception) -> ApplicationError:
    """Map a LiteLLM/provider exception to a retryable or non-retryable ApplicationError."""
    import litellm

    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    if _missing_credentials(exc):
        # LiteLLM reports some providers' missing key as a 500 (OpenAI) or a connection
        # error (Gemini): it is the worker's configuration, not an outage.
        return ApplicationError(
            f"{model}: no API key: set {key_variable(model)} in the worker's environment, or "
            "name another model in spec.model_policy",
            type=ErrorType.MODEL_AUTH_ERROR,
            non_retryable=True,
        )
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError) or status in (
        401,
        403,
    ):
        return ApplicationError(
            f"{model}: the provider rejected the credentials; check {key_variable(model)} "
            "in the worker's environment",
            type=ErrorType.MODEL_AUTH_ERROR,
            non_retryable=True,
        )
    if isinstance(exc, litellm.NotFoundError) or status == 404:
        return ApplicationError(
            f"{model}: model not found at the provider; check spec.model_policy",
            type=ErrorType.MODEL_NOT_FOUND,
            non_retryable=True,
        )
    if isinstance(exc, litellm.RateLimitError) or status == 429:
        delay = _retry_after(exc)
        return ApplicationError(
            f"{model}: rate limited by the provider",
            type=ErrorType.MODEL_RATE_LIMITED,
            next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
        )
    if isinstance(exc, litellm.BadRequestError) or status in (400, 413, 422):
        return ApplicationError(
            f"{model}: the provider refused the request as invalid ({name})",
            type=ErrorType.MODEL_BAD_REQUEST,
            non_retryable=True,
        )
    delay = _retry_after(exc)
    return ApplicationError(
        f"{model}: provider unavailable ({name}{f' {status}' if status else ''})",
        type=ErrorType.MODEL_UNAVAILABLE,
        next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
    )
