"""`openloop doctor` on Linear: an agent bound to a team needs a token (or API key) and the
webhook secret, and the check signs in with them (`viewer`); no Linear agent, no check."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from activities.store.agents import StoredAgent
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.cli.linear_doctor import linear_check
from tests.fakes.linear_api import FakeLinear


def agent(surfaces: dict[str, object]) -> StoredAgent:
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": "triage"},
            "spec": {"surfaces": surfaces},
        }
    )
    return StoredAgent(config, 1, datetime.now(UTC), "sha")


@pytest.fixture
def linear() -> Iterator[FakeLinear]:
    server = FakeLinear().start()
    try:
        yield server
    finally:
        server.stop()


async def test_the_check_names_what_is_missing_then_signs_in(linear: FakeLinear) -> None:
    bound = [agent({"linear": {"teams": ["ENG", "OPS"]}})]
    assert await linear_check(Settings(), [agent({"cli": True})]) is None
    name, ok, detail = await linear_check(Settings(linear_api_url=linear.url), bound) or ("", True, "")
    assert (name, ok) == ("linear", False)
    assert (
        "LINEAR_ACCESS_TOKEN" in detail and "LINEAR_API_KEY" in detail and "LINEAR_WEBHOOK_SECRET" in detail
    )
    wrong = Settings(
        linear_api_url=linear.url,
        linear_api_key=SecretStr("lin_api_wrong"),
        linear_webhook_secret=SecretStr("s"),
    )
    assert (await linear_check(wrong, bound) or ("", True, ""))[1] is False
    right = wrong.model_copy(update={"linear_access_token": SecretStr(linear.token)})
    _, ok, detail = await linear_check(right, bound) or ("", False, "")
    assert ok and detail == "bound to 2 team(s), credentials set, signed in as OpenLoop"
