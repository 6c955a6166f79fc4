"""The MCP server a pyopenloop file declares (`credentials: github`, static `headers`) is
reached with `Authorization: Bearer <GITHUB_TOKEN>` and the static headers: the real HTTP
test server behind a bearer check (401 to any other value) and the real listing activity."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

import activities.mcp.client as mcp_client
from activities.mcp.mcp_activities import list_mcp_tools
from config.mcp import McpServer
from config.settings import Settings
from tests.fakes.mcp_servers import start_http
from workers.embedded import free_port
from workflows.mcp_types import McpListInput


@pytest.fixture
def bearer_checked(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    process = start_http(tmp_path, port, "Bearer gh-token-from-env", 401)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)


def server(url: str) -> McpServer:
    return McpServer(
        name="github-mcp",
        transport="streamable-http",
        url=url,
        headers={"X-MCP-Readonly": "true"},
        headers_from_env={"Authorization": "Bearer ${GITHUB_TOKEN}"},
        allow=["whoami"],
    )


async def test_the_bearer_template_and_static_headers_reach_the_server(
    bearer_checked: str, monkeypatch: pytest.MonkeyPatch, db_settings: Settings
) -> None:
    sent: list[dict[str, str]] = []
    real = mcp_client.http_client

    def recording(headers: dict[str, str], *args: Any, **kwargs: Any) -> httpx2.AsyncClient:
        sent.append(dict(headers))
        return real(headers, *args, **kwargs)

    monkeypatch.setattr(mcp_client, "http_client", recording)
    monkeypatch.setenv("GITHUB_TOKEN", "gh-token-from-env")
    listed = await list_mcp_tools(McpListInput("task-bearer", [server(bearer_checked)]))
    assert [(s.name, s.ok, s.tools) for s in listed.servers] == [("github-mcp", True, 1)]
    assert sent[0] == {"X-MCP-Readonly": "true", "Authorization": "Bearer gh-token-from-env"}


async def test_a_refused_token_names_the_variable_not_the_template(
    bearer_checked: str, monkeypatch: pytest.MonkeyPatch, db_settings: Settings
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "not-the-right-one")
    listed = await list_mcp_tools(McpListInput("task-bearer-401", [server(bearer_checked)]))
    [status] = listed.servers
    assert not status.ok
    assert "401 Unauthorized" in status.problem
    assert "check GITHUB_TOKEN (header Authorization)" in status.problem
    assert "not-the-right-one" not in status.problem
