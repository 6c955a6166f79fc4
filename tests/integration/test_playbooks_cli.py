"""`openloop playbooks apply|runs|show|schedule` on the real dev server and Postgres, a worker
running the steps against the scripted model: a folder is compiled and applied, its cron
playbook triggered through the CLI and its run shown with outputs and costs; an edited cron
updates the schedule, a removed playbook deletes it, and a folder with an error applies
nothing."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest
from click.testing import Result
from temporalio.client import Client
from temporalio.service import RPCError
from typer.testing import CliRunner

from activities.playbooks.schedules import schedule_id
from activities.store import playbooks as playbook_rows
from surfaces.cli.main import app
from tests.fakes.model_api import FakeModelAPI
from tests.integration.playbook_env import PlaybookWorld, answer_with, cli_env, playbook_world
from workers.embedded import TemporalDevServer

SCAN = """\
---
on: cron("{cron}", tz="Europe/Berlin")
agent: triager
output: {{count: int, worst: str}}
budget: $0.50
---
It is {{{{ event.scheduled_at }}}}. Count the critical advisories.
"""
REPORT = """\
---
after: scan
agent: triager
output: {title: str}
---
There are {{ scan.count }} critical advisories; the worst is {{ scan.worst }}.
"""


def write_folder(root: Path, world: PlaybookWorld, agent: str, cron: str = "0 3 * * *") -> str:
    """A playbooks folder with one cron playbook of two steps; the playbook's name."""
    name = world.name("nightly")
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / "registry.yaml").write_text(f"agents: {{triager: {agent}}}\n")
    (root / name / "scan.md").write_text(SCAN.format(cron=cron))
    (root / name / "report.md").write_text(REPORT)
    return name


@pytest.fixture
async def world(client: Client, pg_url: str, tmp_path: Path) -> PlaybookWorld:
    async with playbook_world(client, pg_url, tmp_path) as value:
        yield value  # type: ignore[misc]


async def openloop(env: dict[str, str], *args: str) -> Result:
    return await asyncio.to_thread(lambda: CliRunner().invoke(app, ["playbooks", *args], env=env))


async def test_apply_trigger_runs_and_show_a_cron_playbook(
    world: PlaybookWorld, dev_server: TemporalDevServer, client: Client, api: FakeModelAPI, tmp_path: Path
) -> None:
    api.answer(answer_with("Two critical advisories.", count=2, worst="CVE-2024-0001"))
    api.answer(answer_with("Issue text ready.", title="Critical: CVE-2024-0001"))
    env = cli_env(world, dev_server)
    root = tmp_path / "playbooks"
    name = write_folder(root, world, await world.agent())

    applied = await openloop(env, "apply", "--dir", str(root))
    assert applied.exit_code == 0, applied.output
    assert f"stored  {name} v1" in applied.output
    assert f"schedule  {name} created ({schedule_id(name)})" in applied.output
    triggered = await openloop(env, "schedule", "trigger", name)
    assert triggered.exit_code == 0, triggered.output
    run = await world.finished_run(name)
    listed = await openloop(env, "runs", "--playbook", name)
    shown = await openloop(env, "show", run.record.run_id)

    assert listed.exit_code == 0, listed.output
    assert run.record.run_id in listed.output and "SUCCEEDED" in listed.output and "2/2" in listed.output
    assert shown.exit_code == 0, shown.output
    assert f"{name} v1" in shown.output and "status   SUCCEEDED: 2 step(s) succeeded" in shown.output
    assert 'output  {"count": 2, "worst": "CVE-2024-0001"}' in shown.output
    assert 'output  {"title": "Critical: CVE-2024-0001"}' in shown.output
    assert f"task {run.record.run_id}.scan" in shown.output and "18 tokens" in shown.output
    missing = await openloop(env, "show", "playbook-nope")
    assert missing.exit_code == 1 and "no playbook run playbook-nope" in missing.output


async def test_an_edited_cron_updates_the_schedule_a_removed_playbook_deletes_it_and_errors_apply_nothing(
    world: PlaybookWorld, dev_server: TemporalDevServer, client: Client, tmp_path: Path
) -> None:
    env = cli_env(world, dev_server)
    root = tmp_path / "playbooks"
    agent = await world.agent()
    name = write_folder(root, world, agent)
    assert (await openloop(env, "apply", "--dir", str(root))).exit_code == 0
    paused = await openloop(env, "schedule", "pause", name, "--note", "quiet week")
    again = await openloop(env, "apply", "--dir", str(root))
    write_folder(root, world, agent, cron="15 6 * * 1-5")
    edited = await openloop(env, "apply", "--dir", str(root))
    described = await client.get_schedule_handle(schedule_id(name)).describe()
    (root / name / "report.md").write_text(REPORT.replace("after: scan", "after: nowhere"))
    broken = await openloop(env, "apply", "--dir", str(root))
    versions_after_error = await playbook_rows.get_playbook(await world.pool(), name)
    for path in (root / name).iterdir():
        path.unlink()
    (root / name).rmdir()
    removed = await openloop(env, "apply", "--dir", str(root))
    gone = await openloop(env, "schedule", "trigger", name)

    assert paused.exit_code == 0 and "paused" in paused.output
    assert f"unchanged  {name} v1" in again.output and "schedule" not in again.output
    assert edited.exit_code == 0, edited.output
    assert f"stored  {name} v2" in edited.output and f"schedule  {name} updated" in edited.output
    calendar = described.schedule.spec.calendars[0]
    assert [r.start for r in calendar.hour] == [6] and [r.start for r in calendar.minute] == [15]
    assert described.schedule.state.paused and described.schedule.state.note == "quiet week"
    assert broken.exit_code == 1 and "nowhere" in broken.output and "nothing applied" in broken.output
    assert versions_after_error is not None and versions_after_error.version == 2
    assert removed.exit_code == 0, removed.output
    assert f"retired  {name}" in removed.output and f"schedule  {name} deleted" in removed.output
    with pytest.raises(RPCError):
        await client.get_schedule_handle(schedule_id(name)).describe()
    assert gone.exit_code == 1 and f"no schedule for playbook {name}" in gone.output
    source = textwrap.dedent(SCAN.format(cron="x"))
    assert "{{ event.scheduled_at }}" in source  # the file's braces survive the formatting
