"""The Slack flow's set-up for the tests that run it end to end: settings pointing at a fake
Slack Web API (its token `TOKEN`) with an agent applied, the surfaces app with its lifespan,
and an agent document binding a channel by name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from pydantic import SecretStr
from temporalio.client import Client

from activities import runtime as activity_runtime
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.app import create_app
from tests.fakes.slack_api import FakeSlack
from tests.integration.slack_env import SECRET

TOKEN = "xoxb-flow-token"


async def slack_setup(
    settings: Settings, fake: FakeSlack, task_queue: str, config: dict[str, Any]
) -> Settings:
    settings = settings.model_copy(
        update={
            "slack_signing_secret": SecretStr(SECRET),
            "slack_bot_token": SecretStr(TOKEN),
            "slack_api_url": fake.base_url,
            "task_queue": task_queue,
        }
    )
    activity_runtime.configure(settings)
    await apply_agent(await get_pool(settings.require_database_url()), AgentConfig.model_validate(config))
    return settings


@asynccontextmanager
async def surfaces(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    """The surfaces app with its lifespan (the Slack inbox dispatcher) running."""
    app = create_app(settings, client)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://surfaces.test") as http,
    ):
        yield http


def agent_document(name: str, channel: str) -> str:
    return f"""apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: {name}
spec:
  surfaces:
    slack:
      channels: ["{channel}"]
"""
