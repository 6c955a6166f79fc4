"""Live GitHub: create one issue through the real tool (exactly once) and close it.

Opt-in: E2E_LIVE=1, GITHUB_LIVE_TOKEN (a fine-grained token with Issues read/write on the
sandbox repository) and GITHUB_LIVE_REPO (owner/name). GITHUB_API_URL may point at a
GitHub Enterprise Server. Uses the session Postgres for the idempotency claim.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from github import Auth, Github
from pydantic import SecretStr

from activities.github import client as github_client
from activities.runtime import Runtime
from activities.tools.catalog import native
from config.settings import Settings
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (
            os.environ.get("E2E_LIVE") == "1"
            and os.environ.get("GITHUB_LIVE_TOKEN")
            and os.environ.get("GITHUB_LIVE_REPO")
        ),
        reason="live GitHub test: set E2E_LIVE=1, GITHUB_LIVE_TOKEN and GITHUB_LIVE_REPO",
    ),
]


async def test_create_issue_once_and_close_it(db_settings: Settings) -> None:
    token, repo = os.environ["GITHUB_LIVE_TOKEN"], os.environ["GITHUB_LIVE_REPO"]
    api_url = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    github_client.reset_clients()
    rt = Runtime(db_settings.model_copy(update={"github_token": SecretStr(token), "github_api_url": api_url}))
    handler = native("github.create_issue").run
    assert handler is not None
    inp = ToolCallInput(
        task_id="task-e2e",
        step=1,
        call_id="c1",
        tool="github.create_issue",
        arguments={
            "repo": repo,
            "title": f"OpenLoop live test {uuid.uuid4().hex[:8]}",
            "body": "Created by the OpenLoop end-to-end test; it closes itself.",
        },
        idempotency_key=f"e2e:{uuid.uuid4().hex}",
        context=SurfaceContext(surface="cli", channel="e2e", user="e2e"),
        memory=MemoryScopeRef("default", "e2e", "channel", "e2e", "offline/hashing-256", 1),
        requested_by="e2e",
    )
    first = await handler(inp, rt)
    again = await handler(inp, rt)  # a retry of the same call creates nothing
    number = int(first.split("#")[1].split()[0])
    assert first.startswith("Created issue #") and again.startswith(f"Already created issue #{number}")

    def close() -> str:
        gh = Github(base_url=api_url, auth=Auth.Token(token), retry=None)
        issue = gh.get_repo(repo).get_issue(number)
        issue.edit(state="closed")
        return issue.state

    assert await asyncio.to_thread(close) == "closed"
