"""Shared set-up for the GitHub integration tests: a fake GitHub, the webhook app, payloads,
and the tasks a delivery started (their input; ended when the test is over)."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.service import RPCError

from activities.github import client as github_client
from activities.store.agents import StoredAgent, apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.github import webhooks
from tests.fakes.github_api import FakeGitHub
from workflows.types import TaskInput

SECRET = "webhook-secret"
TOKEN = "ghp_test"
SHA = "abc123def4567890abc123def4567890abc12345"


@contextmanager
def running_fake() -> Iterator[FakeGitHub]:
    server = FakeGitHub(token=TOKEN).start()
    try:
        yield server
    finally:
        server.stop()


def new_repo(fake: FakeGitHub) -> str:
    name = f"acme/r{uuid.uuid4().hex[:8]}"
    fake.add_repo(name)
    return name


def github_settings(settings: Settings, fake: FakeGitHub, **extra: Any) -> Settings:
    """`settings` pointed at the fake GitHub, with a token and the webhook secret."""
    github_client.reset_clients()  # cached clients belong to other settings
    update = {
        "github_api_url": fake.url,
        "github_token": SecretStr(TOKEN),
        "github_webhook_secret": SecretStr(SECRET),
        **extra,
    }
    return settings.model_copy(update=update)


async def bind_agent(settings: Settings, repo: str, **spec: Any) -> StoredAgent:
    """Apply an agent bound to `repo`; `github=` adds to its GitHub surface, the rest to spec."""
    github = {"repos": [repo], **spec.pop("github", {})}
    surfaces: dict[str, Any] = {"github": github, **spec.pop("surfaces", {})}
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": f"gh-{uuid.uuid4().hex[:8]}"},
            "spec": {"surfaces": surfaces, **spec},
        }
    )
    stored, _ = await apply_agent(await get_pool(settings.require_database_url()), config)
    return stored


@dataclass
class Env:
    settings: Settings
    client: Client
    http: httpx.AsyncClient
    fake: FakeGitHub
    repo: str

    async def post(
        self, event: str, payload: Any, delivery: str | None = None, secret: str = SECRET
    ) -> httpx.Response:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": signature,
            "Content-Type": "application/json",
        }
        return await self.http.post("/github/webhook", content=body, headers=headers)

    async def bind_agent(self, **spec: Any) -> StoredAgent:
        return await bind_agent(self.settings, self.repo, **spec)


def app_for(settings: Settings, client: Client) -> FastAPI:
    app = FastAPI()
    app.state.settings, app.state.temporal = settings, client
    webhooks.register(app)
    return app


@asynccontextmanager
async def webhook_env(
    settings: Settings, client: Client, fake: FakeGitHub, task_queue: str
) -> AsyncIterator[Env]:
    settings = github_settings(settings, fake, task_queue=task_queue)
    transport = httpx.ASGITransport(app=app_for(settings, client))
    async with httpx.AsyncClient(transport=transport, base_url="http://surfaces") as http:
        yield Env(settings, client, http, fake, new_repo(fake))
    github_client.reset_clients()


def comment(
    repo: str,
    body: str,
    number: int = 1,
    association: str = "MEMBER",
    login: str = "alice",
    user_type: str = "User",
) -> dict[str, Any]:
    return {
        "action": "created",
        "repository": {"full_name": repo},
        "issue": {"number": number, "title": "Flaky deploy"},
        "comment": {
            "id": 321,
            "body": body,
            "author_association": association,
            "user": {"login": login, "type": user_type},
        },
    }


def failed_run(repo: str, branch: str, pr: int | None) -> dict[str, Any]:
    return {
        "action": "completed",
        "repository": {"full_name": repo},
        "workflow_run": {
            "id": 99,
            "name": "CI",
            "run_number": 4,
            "conclusion": "failure",
            "head_branch": branch,
            "head_sha": SHA,
            "event": "pull_request",
            "head_repository": {"full_name": repo},
            "actor": {"login": "bob"},
            "pull_requests": [{"number": pr}] if pr else [],
            "html_url": f"https://github.test/{repo}/actions/runs/99",
        },
    }


async def task_input(client: Client, task_id: str) -> TaskInput:
    history = await client.get_workflow_handle(task_id).fetch_history()
    attrs = history.events[0].workflow_execution_started_event_attributes
    [decoded] = await client.data_converter.decode(attrs.input.payloads, [TaskInput])
    return decoded  # type: ignore[no-any-return]


async def terminate(client: Client, task_id: str) -> None:
    try:
        await client.get_workflow_handle(task_id).terminate("test over")
    except RPCError:
        pass
