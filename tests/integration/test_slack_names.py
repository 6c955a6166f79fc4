"""Slack names: `#channel` bindings resolved at `agents apply` and followed on rename, and the
directory's short cache (refreshed on a miss). Real Postgres, the real CLI and surfaces app,
the fake Slack Web API."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import yaml
from pydantic import SecretStr
from temporalio.client import Client
from typer.testing import CliRunner

from activities.slack.client import bot_client
from activities.slack.names import DIRECTORY_TTL_SECONDS, MISS_REFRESH_SECONDS, SlackNames, directory
from activities.store.agents import agent_for_slack_channel, apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.cli.main import app
from tests.fakes.slack_api import FakeSlack
from tests.integration.slack_env import SECRET, post_event, settled
from tests.integration.slack_flow_env import TOKEN, agent_document, surfaces

CHANNEL = "C0LEDGER"


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN, page_size=1) as server:  # every listing takes several pages
        server.add_channel("C0OTHER", "random")
        server.add_channel(CHANNEL, "ledger-team")
        server.add_channel("C0ARCHIVE", "ledger-old", archived=True)
        yield server


def test_apply_resolves_a_channel_name_and_names_the_line_of_one_that_does_not_exist(
    fake: FakeSlack, pg_url: str, tmp_path: Path
) -> None:
    name = f"names-{uuid.uuid4().hex[:8]}"
    env = {
        # A URL of its own: the CLI's event loop must not get a pool another test opened.
        "OPENLOOP_DATABASE_URL": f"{pg_url}{'&' if '?' in pg_url else '?'}application_name=openloop-names",
        "OPENLOOP_STATE_DIR": str(tmp_path / "state"),
        "SLACK_BOT_TOKEN": TOKEN,
        "OPENLOOP_SLACK_API_URL": fake.base_url,
        "COLUMNS": "200",
    }
    good = tmp_path / "good.yaml"
    good.write_text(agent_document(name, "#ledger-team"))
    applied = CliRunner().invoke(app, ["agents", "apply", "-f", str(good)], env=env)
    assert applied.exit_code == 0, applied.output
    assert any(c.get("cursor") for c in fake.calls_to("conversations.list"))  # paged through

    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT spec FROM agents WHERE name = %s ORDER BY version DESC LIMIT 1", (name,)
        ).fetchone()
    assert row is not None
    assert row[0]["spec"]["surfaces"]["slack"]["channels"] == [CHANNEL]  # stored by id

    bad = tmp_path / "bad.yaml"
    bad.write_text(agent_document(f"{name}-b", "#ledger-old"))  # archived: the bot cannot see it
    refused = CliRunner().invoke(app, ["agents", "apply", "-f", str(bad)], env=env)
    assert refused.exit_code == 1
    assert f"{bad}:8" in refused.output and "spec.surfaces.slack.channels[0]" in refused.output
    assert "no Slack channel named #ledger-old" in refused.output and "nothing applied" in refused.output


async def test_a_renamed_channel_keeps_its_agent_updates_its_name_and_is_audited(
    fake: FakeSlack, settings: Settings, client: Client
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    fake.add_channel(channel, "ledger-eng")
    settings = settings.model_copy(
        update={
            "slack_signing_secret": SecretStr(SECRET),
            "slack_bot_token": SecretStr(TOKEN),
            "slack_api_url": fake.base_url,
        }
    )
    pool = await get_pool(settings.require_database_url())
    document = yaml.safe_load(agent_document(f"rename-{uuid.uuid4().hex[:6]}", channel))
    stored, _ = await apply_agent(pool, AgentConfig.model_validate(document))
    names = directory(settings)
    assert await names.channel("ledger-eng") == channel

    async with surfaces(settings, client) as http:
        for new_name, event_id in (("ledger-platform", "EvREN1"), ("ledger-core", "EvREN2")):
            event = fake.directory.rename_channel(channel, new_name, f"{event_id}{uuid.uuid4().hex[:6]}")
            assert (await post_event(http, event)).status_code == 200
            assert await settled(settings, event["event_id"]) == f"renamed: {stored.name} follows {channel}"

    bound = await agent_for_slack_channel(pool, channel)
    assert bound is not None and bound.name == stored.name  # the binding follows the id
    assert await names.channel("ledger-core") == channel  # the cache forgot the old listing
    assert await names.channel("ledger-eng") is None
    with psycopg.connect(settings.require_database_url()) as conn:
        row = conn.execute(
            "SELECT name, previous_name FROM slack_channel_names WHERE channel_id = %s", (channel,)
        ).fetchone()
        audits = conn.execute(
            "SELECT outcome FROM audit_log WHERE channel = %s AND kind = 'channel_renamed' ORDER BY id",
            (channel,),
        ).fetchall()
    assert row == ("ledger-core", "ledger-platform")
    assert len(audits) == 2
    assert audits[1][0].startswith(f"#ledger-platform is now #ledger-core; {stored.name} stays bound")


async def test_the_directory_is_cached_briefly_and_a_miss_reads_it_again(fake: FakeSlack) -> None:
    now = [1000.0]
    settings = Settings(slack_bot_token=SecretStr(TOKEN), slack_api_url=fake.base_url)
    names = SlackNames(bot_client(settings), clock=lambda: now[0])
    fake.add_user("U0KIM", "kim")
    fake.set_usergroup("S0ONCALL", ["U0KIM"], handle="oncall")
    assert await names.user("kim") == "U0KIM"
    listings = len(fake.calls_to("users.list"))
    fake.add_user("U0LEE", "lee")
    assert await names.user("kim") == "U0KIM" and await names.user("lee") is None  # just read
    assert len(fake.calls_to("users.list")) == listings
    now[0] += MISS_REFRESH_SECONDS
    assert await names.user("lee") == "U0LEE"  # a miss reads the listing again
    assert await names.members("S0ONCALL") == ["U0KIM"]
    fake.set_usergroup("S0ONCALL", ["U0KIM", "U0LEE"], handle="oncall")
    assert await names.members("S0ONCALL") == ["U0KIM"]  # within the TTL
    now[0] += DIRECTORY_TTL_SECONDS + 1
    assert await names.members("S0ONCALL") == ["U0KIM", "U0LEE"]
    assert await names.members("S0GONE") is None  # no_such_subteam: the group admits nobody
