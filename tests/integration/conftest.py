"""Fixtures shared by the integration tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from activities.llm import health
from activities.providers import API_BASE_ENV
from config.settings import OidcSettings, Settings
from surfaces.app import create_app
from tests.fakes.model_api import FakeModelAPI
from tests.fakes.oidc_provider import FakeOidcProvider
from tests.helpers import pending_approval
from tests.integration.dashboard_env import start_dashboard_task
from tests.integration.up_env import stack_env  # noqa: F401 - the fixture, for the modules here
from tests.workflow.record_histories import ISSUE_ARGS, ISSUES_YAML
from tests.workflow.scripted import Script, say, use
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow


def serving(server: FakeModelAPI, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelAPI]:
    """Start `server` and send LiteLLM's requests to it, with a test key, until the test ends."""
    server.start()
    health.forget()  # a provider another test made cool down is asked again
    monkeypatch.setenv(API_BASE_ENV, server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    yield server
    server.stop()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, db_settings: Settings) -> Iterator[FakeModelAPI]:
    """A local OpenAI-compatible server that LiteLLM's requests go to."""
    yield from serving(FakeModelAPI(), monkeypatch)


# The dashboard with sign-in through OpenID Connect (test_dashboard_oidc, test_dashboard_sessions).
# The modules testing the dashboard without it define a `web` of their own, which overrides this.


@pytest.fixture
def provider() -> Iterator[FakeOidcProvider]:
    """The OpenID Connect provider, a real HTTP server on 127.0.0.1."""
    started = FakeOidcProvider().start()
    yield started
    started.stop()


@pytest.fixture
def suffix() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
async def web(
    settings: Settings, client: Client, provider: FakeOidcProvider, suffix: str
) -> AsyncIterator[Any]:
    """The dashboard signing people in through `provider`; root-<suffix> is an admin."""
    oidc = OidcSettings(
        issuer=provider.issuer,
        client_id=provider.client_id,
        client_secret=SecretStr(provider.client_secret),
        name="Test IdP",
        github_claim="github_login",
        admins=(f"root-{suffix}",),
    )
    app = create_app(settings.model_copy(update={"oidc": oidc}), client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dash.test") as http:
        http.dashboard_app = app  # type: ignore[attr-defined]
        yield http


@pytest.fixture
async def waiting(client: Client, task_queue: str, suffix: str) -> AsyncIterator[Any]:
    """A task waiting for U_ALICE or the GitHub login carol-<suffix> to approve an issue."""
    script = Script(
        [],
        default=lambda inp: (
            say("Filed.", (210, 15), 0.0004)
            if inp.step > 1
            else use("github.create_issue", ISSUE_ARGS, "c1", (150, 20), 0.0003)
        ),
    )
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=script.activities(),
        workflow_runner=workflow_runner(),
    )
    yaml_text = ISSUES_YAML.replace("approvers: [U_ALICE]", f"approvers: [U_ALICE, carol-{suffix}]")
    async with worker:
        handle = await start_dashboard_task(
            client, yaml_text, f"triage-{suffix}", f"eng-{suffix}", task_queue
        )
        await pending_approval(handle)
        yield handle, script
        if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            await handle.terminate("test over")
