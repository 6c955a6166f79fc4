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

# Activities that wait on something slow beat at half their heartbeat timeout
# (`activities.heartbeats`; the model call every 10 s): one whose worker was killed mid-wait
# is retried elsewhere after this, not after its whole start-to-close timeout.
WAITING_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
MODEL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=5),
    "heartbeat_timeout": WAITING_HEARTBEAT_TIMEOUT,
    "retry_policy": MODEL_RETRY,
    "summary": "model call",
}
TOOL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=2),
    "heartbeat_timeout": WAITING_HEARTBEAT_TIMEOUT,
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
    "heartbeat_timeout": MCP_CALL_HEARTBEAT_TIMEOUT,
    "retry_policy": RetryPolicy(maximum_attempts=3, non_retryable_error_types=NON_RETRYABLE_TOOL_ERRORS),
    "summary": "list MCP tools",
}


# Rows in Postgres and starts on Temporal, from the loop and playbook workflows: retried
# through an outage of about an hour and a half.
STORE_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_interval=timedelta(minutes=1), maximum_attempts=100),
}

# A playbook's poll sensor: one that keeps failing waits for its next firing rather than
# piling up; one that cannot be found stays so until its file is fixed.
SENSOR_POLL_TIMEOUT = timedelta(minutes=5)
SENSOR_POLL_RETRY = RetryPolicy(maximum_attempts=3, non_retryable_error_types=[ErrorType.SENSOR_ERROR.value])

# The daily memory purge: a long delete that beats, retried a few times, never piling up.
PURGE_TIMEOUT = timedelta(minutes=10)
PURGE_HEARTBEAT_TIMEOUT = timedelta(minutes=2)
PURGE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=5),
    maximum_attempts=5,
)

# A loop's workspace: a clone may be big; a command gets its own limit plus this grace (past
# it the worker is stuck); what cannot be fixed by trying again is not retried.
WORKSPACE_CLONE_TIMEOUT = timedelta(minutes=15)
WORKSPACE_COMMAND_GRACE = timedelta(seconds=60)
WORKSPACE_DIFF_TIMEOUT = timedelta(minutes=5)
WORKSPACE_ACQUIRE_RETRY = RetryPolicy(
    maximum_attempts=5,
    non_retryable_error_types=[
        ErrorType.WORKSPACE_ERROR.value,
        ErrorType.SANDBOX_UNAVAILABLE.value,
        ErrorType.WORKSPACE_LOST.value,
        ErrorType.SETUP_FAILED.value,
    ],
)
# On the queue of the worker holding a workspace: a second attempt on a dead worker's queue
# would wait for nobody, so the loop takes the workspace again instead.
ON_HOLDING_WORKER_RETRY = RetryPolicy(maximum_attempts=1)
