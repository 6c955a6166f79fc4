"""Who may trigger an agent by user group reads the group from the same short-lived Slack
directory that resolves approver groups (`activities.slack.names.directory`): one read of
`usergroups.users.list` serves both, and a group Slack cannot read admits nobody. Real
Postgres and dev server, the fake Slack Web API."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from temporalio.client import Client

from activities.slack.names import directory, resolve_approvers
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.slack.dispatch import SlackDispatcher
from tests.fakes.slack_api import FakeSlack

TOKEN = "xoxb-trigger-groups"


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


async def test_trigger_groups_and_approver_groups_share_one_directory(
    settings: Settings, client: Client, fake: FakeSlack
) -> None:
    settings = settings.model_copy(
        update={"slack_bot_token": SecretStr(TOKEN), "slack_api_url": fake.base_url}
    )
    fake.set_usergroup("S_MAINTAINERS", ["U_CAROL"])
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": f"groups-{uuid.uuid4().hex[:8]}"},
            "spec": {
                "surfaces": {
                    "slack": {
                        "channels": ["C" + uuid.uuid4().hex[:10].upper()],
                        "triggers": {"everyone": False, "usergroups": ["S_MAINTAINERS", "S_GONE"]},
                    }
                }
            },
        }
    )
    agent, _ = await apply_agent(await get_pool(settings.require_database_url()), config)
    may_trigger = SlackDispatcher(settings, client).steering.may_trigger

    assert await may_trigger(agent, "U_CAROL")
    assert not await may_trigger(agent, "U_MALLORY")  # S_GONE does not exist: admits nobody
    approvers = await resolve_approvers(["S_MAINTAINERS"], directory(settings))
    assert approvers.user_ids == ["U_CAROL"]
    reads = [c.args.get("usergroup") for c in fake.calls if c.method == "usergroups.users.list"]
    assert sorted(reads) == ["S_GONE", "S_MAINTAINERS"]  # each read once, for both uses
