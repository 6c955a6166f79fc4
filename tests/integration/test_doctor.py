"""`openloop doctor` on the real dev server and Postgres: it names each thing missing (a model's
key, Slack credentials for a bound channel, a hook's secret, a sensor that does not import, a
cron playbook without its schedule) with the fix, exits 1, and passes each check once fixed."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
import typer
from pydantic import SecretStr
from temporalio.client import Client
from typer.testing import CliRunner

from activities.playbooks.schedules import schedule_id
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from surfaces.cli import doctor
from surfaces.sensors import PLAYBOOKS_DIR_ENV
from tests.integration.playbook_env import PlaybookWorld, on_cron, playbook, playbook_world
from workers.embedded import TemporalDevServer
from workflows.playbook_types import EventType, PlaybookStep

MODEL = "anthropic/claude-3-5-haiku-20241022"


@pytest.fixture
async def world(client: Client, pg_url: str, tmp_path: Path) -> PlaybookWorld:
    async with playbook_world(client, pg_url, tmp_path) as value:
        yield value  # type: ignore[misc]


def by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {check.name: check for check in checks}


async def test_doctor_names_what_is_missing_and_passes_once_it_is_fixed(
    world: PlaybookWorld,
    dev_server: TemporalDevServer,
    client: Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("ANTHROPIC_API_KEY", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    channel = f"C{uuid.uuid4().hex[:8].upper()}"
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": world.name("doctor")},
            "spec": {"model_policy": {"default": MODEL}, "surfaces": {"slack": {"channels": [channel]}}},
        }
    )
    await apply_agent(await get_pool(world.settings.require_database_url()), config)
    hook, secret_env = world.name("deploys"), f"DEPLOY_SECRET_{world.suffix.upper()}"
    monkeypatch.delenv(secret_env, raising=False)
    event = EventType(
        name=world.name("Deployed"), source="webhook", match={"hook": hook, "secret_env": secret_env}
    )
    name = world.name("nightly")
    step = PlaybookStep(name="scan", agent=config.name, instructions="Scan.")
    await world.apply([playbook(name, on_cron("0 3 * * *"), step)], [event])
    await client.get_schedule_handle(schedule_id(name)).delete()
    root = tmp_path / "playbooks"
    (root / "sensors").mkdir(parents=True)
    (root / "sensors" / "broken.py").write_text("import not_a_module_anywhere\n")
    settings = world.settings.model_copy(update={"temporal_address": dev_server.address})

    broken = by_name(await doctor.run_checks(settings, root))
    app = typer.Typer()
    doctor.register(app)
    monkeypatch.setenv("OPENLOOP_DATABASE_URL", settings.require_database_url())
    monkeypatch.setenv("OPENLOOP_TEMPORAL_ADDRESS", dev_server.address)
    monkeypatch.setenv("OPENLOOP_STATE_DIR", str(settings.state_dir))
    monkeypatch.setenv(PLAYBOOKS_DIR_ENV, str(root))
    cli = await asyncio.to_thread(lambda: CliRunner().invoke(app, [], env={"COLUMNS": "300"}))

    assert not broken["model keys"].ok and f"{MODEL} (agent {config.name}): set ANTHROPIC_API_KEY" in (
        broken["model keys"].detail
    )
    assert not broken["slack"].ok and "set SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET" in broken["slack"].detail
    assert (
        not broken[f"webhook /hooks/{hook}"].ok
        and f"set {secret_env}" in broken[f"webhook /hooks/{hook}"].detail
    )
    assert (
        not broken["sensors"].ok
        and "broken.py: does not import: ModuleNotFoundError" in broken["sensors"].detail
    )
    assert not broken["schedules"].ok and f"{name} has no schedule" in broken["schedules"].detail
    assert "run openloop playbooks apply" in broken["schedules"].detail
    assert broken["database"].ok and broken["temporal"].ok
    assert cli.exit_code == 1, cli.output
    assert f"✗ webhook /hooks/{hook}: set {secret_env}" in cli.output and "problem(s)" in cli.output

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv(secret_env, "s3cret")
    (root / "sensors" / "broken.py").write_text(
        f'from config.playbooks.sensor import sensor\n\n\n@sensor(webhook="/hooks/{hook}-s", emits="X")\n'
        "def made(request):\n    return None\n"
    )
    monkeypatch.setenv(f"OPENLOOP_HOOK_SECRET_{hook.upper().replace('-', '_')}_S", "other")
    await world.apply([playbook(name, on_cron("0 3 * * *"), step)], [event])
    fixed_settings = settings.model_copy(
        update={"slack_bot_token": SecretStr("xoxb-1"), "slack_signing_secret": SecretStr("sig")}
    )
    fixed = by_name(await doctor.run_checks(fixed_settings, root))

    assert f"{MODEL}" not in fixed["model keys"].detail
    for check in (
        "slack",
        f"webhook /hooks/{hook}",
        f"webhook /hooks/{hook}-s",
        "sensors",
        "database",
        "temporal",
    ):
        assert fixed[check].ok, fixed[check]
    assert f"{name}" not in fixed["schedules"].detail  # other tests' leftovers may still be named
