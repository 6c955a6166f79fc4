"""Connecting to one MCP server with the official SDK: stdio or streamable HTTP.

A connection is opened and closed by one task (the SDK's cancel scopes break when a session
is closed from another task): `connect` for one use, or a cached session's own task
(`activities.mcp.sessions`), on which any task may send requests. Secrets come from
the environment variables the config names, read here and never put in history. Failures
are sorted for Temporal: a server that cannot be reached is retried, a protocol error is not,
nor a credential the server refuses (`activities.mcp.refusal`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpcore2
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from temporalio.exceptions import ApplicationError

from activities.mcp.refusal import RefusalWatch, refused
from config.mcp import McpServer, header_value
from workflows.errors import ErrorType

CONNECT_SECONDS = 10.0


@contextlib.asynccontextmanager
async def connect(server: McpServer) -> AsyncIterator[Client]:
    """An open client for `server`; errors raised as Temporal application errors."""
    watch = RefusalWatch()
    try:
        async with contextlib.AsyncExitStack() as stack:
            yield await open_client(server, stack, watch)
    except BaseException as err:
        raise classified(server, err, watch) from None


async def open_client(server: McpServer, stack: contextlib.AsyncExitStack, watch: RefusalWatch) -> Client:
    """A client for `server`, initialised, its transport's contexts entered on `stack` (which
    must be closed by the task that opened it)."""
    target = await _target(server, stack, watch)
    return await stack.enter_async_context(Client(target, read_timeout_seconds=server.timeout_seconds))


def classified(server: McpServer, err: BaseException, watch: RefusalWatch) -> BaseException:
    """`err` as the Temporal application error it means (a cancellation or a bug: as it is)."""
    inner = _innermost(err)
    if isinstance(inner, ApplicationError):
        return inner
    if watch.status is not None and isinstance(inner, Exception):
        return refused(server, watch.status)  # the SDK says only "Server returned an error response"
    if isinstance(inner, MCPError) and inner.code == CONNECTION_CLOSED:
        return ApplicationError(
            f"the MCP server {server.name} closed the connection", type=ErrorType.MCP_UNAVAILABLE
        )
    if isinstance(inner, MCPError):
        return ApplicationError(
            f"the MCP server {server.name} answered with an error: {inner.message}",
            type=ErrorType.MCP_PROTOCOL_ERROR,
            non_retryable=True,
        )
    if isinstance(inner, (OSError, TimeoutError, httpx2.HTTPError, ConnectionError)) or inner is not err:
        return ApplicationError(
            f"the MCP server {server.name} could not be reached: {describe(inner)}",
            type=ErrorType.MCP_UNAVAILABLE,
        )
    return err  # a cancellation or a bug: as it is


def _innermost(err: BaseException) -> BaseException:
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def describe(err: BaseException) -> str:
    """A short reason a person can act on, from the innermost error of a group."""
    err = _innermost(err)
    text = (err.message if isinstance(err, ApplicationError) else str(err)) or type(err).__name__
    return text.splitlines()[0][:200]


def credentials(server: McpServer) -> dict[str, str]:
    """What the worker sends `server` from its environment: the stdio process's environment,
    or the HTTP headers (static and resolved). Secrets: never logged, only hashed."""
    if server.transport == "stdio":
        return {name: _env(server, name) for name in server.env_from}
    variables = server.headers_from_env.items()
    lookup = functools.partial(_env, server)
    return {**server.headers, **{header: header_value(value, lookup) for header, value in variables}}


async def _target(server: McpServer, stack: contextlib.AsyncExitStack, watch: RefusalWatch) -> Any:
    if server.transport == "stdio":
        command = server.command or []
        return StdioServerParameters(command=command[0], args=command[1:], env=credentials(server))
    headers = credentials(server)
    timeout = httpx2.Timeout(CONNECT_SECONDS, read=server.timeout_seconds)
    http = await stack.enter_async_context(http_client(headers=headers, timeout=timeout, watch=watch))
    return streamable_http_client(server.url or "", http_client=http)


def http_client(
    headers: dict[str, str], timeout: httpx2.Timeout, watch: RefusalWatch | None = None
) -> httpx2.AsyncClient:
    """As the SDK's own client (create_mcp_http_client), but with one TLS context per worker:
    building one loads the certificate bundle, ~24 ms of CPU on every connection otherwise."""
    hooks: dict[str, list[Callable[..., Any]]] = {"response": [watch] if watch is not None else []}
    return httpx2.AsyncClient(headers=headers, timeout=timeout, verify=_tls_context(), event_hooks=hooks)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    return httpcore2.default_ssl_context()


def _env(server: McpServer, name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise ApplicationError(
            f"the MCP server {server.name} needs the environment variable {name}, which this worker lacks",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    return value
