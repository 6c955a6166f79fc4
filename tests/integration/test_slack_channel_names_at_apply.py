"""`agents apply` records the name each `#channel` binding was resolved from, so the channel's
first rename is audited with the name it had. Real Postgres, the real CLI and surfaces app,
the real dev server, the fake Slack Web API."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pydantic import SecretStr
from temporalio.client import Client
from typer.testing import CliRunner

from config.settings import Settings
from surfaces.cli.main import app
from tests.fakes.slack_api import FakeSlack
from tests.integration.slack_env import SECRET, post_event, settled
from tests.integration.slack_flow_env import TOKEN, agent_document, surfaces


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


async def test_the_first_rename_after_apply_names_the_channels_old_name(
    fake: FakeSlack, settings: Settings, client: Client, pg_url: str, tmp_path: Path
) -> None:
    channel = "C" + uuid.uuid4().hex[:10].upper()
    old, new = f"ledger-{uuid.uuid4().hex[:6]}", f"ledger-core-{uuid.uuid4().hex[:6]}"
    fake.add_channel(channel, old)
    name = f"apply-names-{uuid.uuid4().hex[:8]}"
    document = tmp_path / "agent.yaml"
    document.write_text(agent_document(name, f"#{old}"))
    env = {
        # A URL of its own: the CLI's event loop must not get a pool another test opened.
        "OPENLOOP_DATABASE_URL": f"{pg_url}{'&' if '?' in pg_url else '?'}application_name=openloop-apply",
        "OPENLOOP_STATE_DIR": str(tmp_path / "state"),
        "SLACK_BOT_TOKEN": TOKEN,
        "OPENLOOP_SLACK_API_URL": fake.base_url,
        "COLUMNS": "200",
    }
    applied = await asyncio.to_thread(
        CliRunner().invoke, app, ["agents", "apply", "-f", str(document)], env=env
    )
    assert applied.exit_code == 0, applied.output
    with psycopg.connect(pg_url) as conn:
        recorded = conn.execute(
            "SELECT name, previous_name FROM slack_channel_names WHERE channel_id = %s", (channel,)
        ).fetchone()
    assert recorded == (old, None)

    settings = settings.model_copy(
        update={
            "slack_signing_secret": SecretStr(SECRET),
            "slack_bot_token": SecretStr(TOKEN),
            "slack_api_url": fake.base_url,
        }
    )
    async with surfaces(settings, client) as http:
        event = fake.directory.rename_channel(channel, new, f"EvAPPLYREN{uuid.uuid4().hex[:6]}")
        assert (await post_event(http, event)).status_code == 200
        assert await settled(settings, event["event_id"]) == f"renamed: {name} follows {channel}"
    with psycopg.connect(pg_url) as conn:
        [outcome] = conn.execute(
            "SELECT outcome FROM audit_log WHERE channel = %s AND kind = 'channel_renamed'", (channel,)
        ).fetchone() or [None]
    assert str(outcome).startswith(f"#{old} is now #{new}; {name} stays bound")
