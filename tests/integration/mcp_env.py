"""MCP servers for the tests: the two test servers (tests/fakes/mcp_servers.py: `notes` over
stdio, `web` over streamable HTTP behind a bearer header read from the environment), an agent
using both, and what the model was told of their results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.fakes.model_api import FakeModelAPI
from tests.reliability.harness import agent_config
from workflows.untrusted import unwrap

SECRET = "Bearer s3cret-from-env"


def servers(state: Path, url: str, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": "notes",
            "transport": "stdio",
            "command": [sys.executable, "-m", "tests.fakes.mcp_servers", "stdio", str(state)],
            "allow": ["read_note", "create_note", "fail", "shape"],
            "writes": ["create_note"],
        },
        {
            "name": "web",
            "transport": "streamable-http",
            "url": url,
            "headers_from_env": {"Authorization": "TEST_MCP_AUTH"},
            "allow": ["whoami", "read_*"],
            **extra,
        },
    ]


def mcp_agent(state: Path, url: str, **extra: Any) -> Any:
    return agent_config(
        mcp_servers=servers(state, url, **extra),
        approvals={"require_for": ["notes.create_*"], "approvers": ["cli:local"]},
    )


def told(api: FakeModelAPI, request: int) -> dict[str, str]:
    messages = api.requests[request].body["messages"]
    return {m["tool_call_id"]: unwrap(m["content"]) for m in messages if m["role"] == "tool"}
