"""Timeouts and retry policies of every activity the task calls, as named constants.

Only Temporal retries: client libraries inside activities have their own retries off.
Every policy has a maximum; errors that retrying cannot fix are listed as non-retryable.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy

from workflows.errors import ErrorType

# Provider errors that a retry cannot fix (bad key, bad request, no such model).
NON_RETRYABLE_MODEL_ERRORS = [
    ErrorType.MODEL_AUTH_ERROR.value,
    ErrorType.MODEL_BAD_REQUEST.value,
    ErrorType.MODEL_NOT_FOUND.value,
    ErrorType.PROMPT_TOO_LARGE.value,  # no retry makes it fit: the workflow must shrink it
]
# A tool or surface that is not configured stays so until someone fixes the config; an MCP
# server that refuses the credential (401/403) refuses it again until someone changes it.
NON_RETRYABLE_TOOL_ERRORS = [
    ErrorType.TOOL_CONFIG_ERROR.value,
    ErrorType.MCP_PROTOCOL_ERROR.value,
    ErrorType.MCP_AUTH_ERROR.value,
]

MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=5),
    maximum_attempts=20,  # about an hour of provider outage before the task gives up
    non_retryable_error_types=NON_RETRYABLE_MODEL_ERRORS,
)

TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=2),
    maximum_attempts=10,
    non_retryable_error_types=NON_RETRYABLE_TOOL_ERRORS,
)

SURFACE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=10,
)

LOCAL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=10,
)

MODEL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=5),
    "heartbeat_timeout": timedelta(seconds=60),
    "retry_policy": MODEL_RETRY,
    "summary": "model call",
}
TOOL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=2),
    "retry_policy": TOOL_RETRY,
    "summary": "tool call",
}
SURFACE_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": SURFACE_RETRY,
}
LOCAL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=15),
    "retry_policy": LOCAL_RETRY,
}
LOCAL_TOOL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": TOOL_RETRY,
    "summary": "tool call (local)",
}
# An MCP server that is down is retried a few times with backoff (about 2 minutes in all),
# then the task hears that the call failed; each attempt connects, calls and closes.
MCP_CALL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=6,
    non_retryable_error_types=NON_RETRYABLE_TOOL_ERRORS,
)
# The call heartbeats at half this while it waits for the server
# (`activities.heartbeats`), so a call whose worker died is retried after this, not after
# the 2-minute start-to-close timeout; a slow tool on a live worker keeps beating.
MCP_CALL_HEARTBEAT_TIMEOUT = timedelta(seconds=20)
MCP_CALL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=2),
    "heartbeat_timeout": MCP_CALL_HEARTBEAT_TIMEOUT,
    "retry_policy": MCP_CALL_RETRY,
    "summary": "MCP tool call",
}
# Listing reports each server's own failure in its result; the activity itself is retried
# only when the worker cannot run it.
MCP_LIST_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=2),
    "retry_policy": RetryPolicy(maximum_attempts=3, non_retryable_error_types=NON_RETRYABLE_TOOL_ERRORS),
    "summary": "list MCP tools",
}
