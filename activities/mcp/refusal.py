"""An MCP server that refuses our credential over HTTP (401, 403), said so a person can fix it.

The SDK's streamable-HTTP transport answers any 4xx to a request with one JSON-RPC error,
"Server returned an error response", and the status is lost on the way (it raises no typed
HTTP error). A response hook on the connection's own HTTP client keeps the first refusal, so
the error names the status, the URL, and the environment variable and header the agent's
config (`headers_from_env`) sends the credential in. A refusal is not retried: the same
credential is refused again until someone changes it.
"""

from __future__ import annotations

from http import HTTPStatus

import httpx2
from temporalio.exceptions import ApplicationError

from config.mcp import McpServer, header_variables
from workflows.errors import ErrorType

REFUSED = frozenset({HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN})
SESSION_HEADER = "mcp-session-id"


class RefusalWatch:
    """An httpx response hook: the first 401 or 403 any request of a connection received, and
    whether the server answered 404 to a request that named a session: it no longer knows the
    session and did not process the request (the spec's "start a new session")."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.session_gone = False

    async def __call__(self, response: httpx2.Response) -> None:
        if self.status is None and response.status_code in REFUSED:
            self.status = response.status_code
        if response.status_code == HTTPStatus.NOT_FOUND and SESSION_HEADER in response.request.headers:
            self.session_gone = True


def refused(server: McpServer, status: int) -> ApplicationError:
    """What the refusal means and what to check, without the credential itself."""
    where = (server.url or "").split("?", 1)[0]  # a query string may carry a token
    sent = [
        f"{' and '.join(header_variables(value))} (header {header})"
        for header, value in server.headers_from_env.items()
    ]
    if sent:
        fix = f"check {', '.join(sent)}"
        if status == HTTPStatus.FORBIDDEN:
            fix += ": the server knows the credential but does not allow it here"
    else:
        fix = (
            "the agent's config sends no credential: name the header and its environment "
            "variable in headers_from_env"
        )
    return ApplicationError(
        f"the MCP server {server.name} refused the request: {status} {HTTPStatus(status).phrase} "
        f"from {where}: {fix}",
        type=ErrorType.MCP_AUTH_ERROR,
        non_retryable=True,
    )
