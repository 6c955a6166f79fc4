"""The read-only Playbooks pages against real Postgres: the list (trigger, next cron run, last
run, retired ones marked, filters), a playbook's DAG, validation state, versions and the diff
between them, and a run's steps with their outputs, costs and task links. Playbooks are
compiled from files by the compiler and stored with the store's apply; runs are written with
the store's `record_run`, as the run workflow writes them. A viewer reads all of it, and a
webhook secret shows by the name of its variable only."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client

from activities.store import playbooks as playbook_rows
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.playbooks import compile_playbooks
from config.settings import Settings
from surfaces.app import create_app
from tests.integration.dashboard_env import sign_in
from workflows.playbook_calls import RunRecord
from workflows.playbook_types import CompiledPlaybook, PlaybookRunStatus, StepRun, StepStatus

D = "/dashboard"
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0"  # token-shaped: masked wherever it shows


@pytest.fixture
async def web(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dash.test") as http:
        http.app_settings = settings  # type: ignore[attr-defined]
        yield http


def _folder(root: Path, suffix: str, secret_env: str, propose: str, with_gone: bool) -> Path:
    files = {
        "registry.yaml": f"""
events:
  Paged:
    fields: {{service: str, summary: str}}
    webhook: {{hook: pager-{suffix}, secret_env: {secret_env}}}
agents: {{triager: triager-{suffix}, fixer: fixer-{suffix}}}
defaults: {{budget: $0.50}}
""",
        f"triage-{suffix}/investigate.md": """---
on: Paged
agent: triager
output: {verdict: enum[real, flaky], notes: str}
---
{{ event.service }} paged: {{ event.summary }}. Decide whether it is real.
""",
        f"triage-{suffix}/propose.md": f"""---
after: investigate
agent: fixer
output: {{summary: str, pull_request_url: str?}}
budget: $2.00
approval: required
---
The page was {{{{ investigate.verdict }}}}: {{{{ investigate.notes }}}}
{propose}
""",
        f"triage-{suffix}/notify.md": """---
after: investigate
agent: triager
output: {posted: bool}
---
Tell the channel what {{ investigate.notes }} says.
""",
        f"nightly-{suffix}/scan.md": """---
on: cron("0 3 * * *", tz="Europe/Berlin")
agent: triager
output: {critical: int}
---
Count the critical advisories since {{ event.last_run }}.
""",
    }
    if with_gone:
        files[f"gone-{suffix}/only.md"] = '---\non: cron("*/5 * * * *")\nagent: triager\n---\nSay hi.\n'
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text.lstrip("\n"), encoding="utf-8")
    return root


async def _apply(pool: AsyncConnectionPool, root: Path, applied_by: str) -> dict[str, CompiledPlaybook]:
    report = compile_playbooks(root)
    assert report.ok, report.errors
    applied = await playbook_rows.apply_playbooks(
        pool, report.playbooks, list(report.events.values()), applied_by
    )
    return {playbook.name: playbook for playbook in applied.playbooks}


def _row(page: str, name: str) -> str:
    """The table row linking to `name`, entities decoded."""
    return html.unescape(next(row for row in page.split("<tr>") if f">{name}</a>" in row))


async def test_playbooks_pages_for_a_viewer(
    web: httpx.AsyncClient, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix = uuid.uuid4().hex[:8]
    triage, nightly, gone = f"triage-{suffix}", f"nightly-{suffix}", f"gone-{suffix}"
    secret_env, secret = f"PAGER_SECRET_{suffix.upper()}", f"whsec-{uuid.uuid4().hex}"
    monkeypatch.setenv(secret_env, secret)
    pool = await get_pool(pg_url)
    agent = {"apiVersion": "openloop.ai/v1alpha1", "kind": "Agent", "metadata": {"name": f"triager-{suffix}"}}
    await apply_agent(pool, AgentConfig.model_validate({**agent, "spec": {}}))  # fixer-… is never applied

    first = _folder(tmp_path / "v1", suffix, secret_env, "Propose a fix as a draft pull request.", True)
    v1 = (await _apply(pool, first, "U_ALICE"))[triage]
    second = _folder(tmp_path / "v2", suffix, secret_env, "Propose the smallest fix; open nothing.", False)
    v2 = (await _apply(pool, second, "U_BOB"))[triage]
    assert (v1.version, v2.version) == (1, 2) and v1.content_hash != v2.content_hash

    failed_run, running_run = f"pbrun-{suffix}-1", f"pbrun-{suffix}-2"
    investigate = StepRun(
        name="investigate",
        status=StepStatus.SUCCEEDED,
        task_id=f"task-pb-{suffix}-investigate",
        output={"verdict": "real", "notes": f"the deploy used {TOKEN}"},
        cost_usd=0.0123,
        tokens=900,
        attempts=1,
    )
    propose = StepRun(
        name="propose",
        status=StepStatus.FAILED,
        task_id=f"task-pb-{suffix}-propose",
        cost_usd=0.02,
        attempts=2,
        reason="the answer did not validate twice: summary is missing",
    )
    notify = StepRun(name="notify", status=StepStatus.SKIPPED, reason="investigate's downstream failed")
    await playbook_rows.record_run(
        pool,
        RunRecord(
            run_id=failed_run,
            playbook=triage,
            version=2,
            event_name="Paged",
            run_key=f"delivery-{suffix}",
            event={"service": "billing", "summary": "5xx", "authorization": "Bearer abcdefgh12345678"},
            status=PlaybookRunStatus.FAILED,
            steps=[investigate, propose, notify],
            cost_usd=0.0323,
            reason="step propose failed",
            seq=4,
        ),
    )
    await playbook_rows.record_run(
        pool,
        RunRecord(
            run_id=running_run,
            playbook=nightly,
            version=1,
            event_name="cron",
            run_key="2030-01-01T02:00:00Z",
            steps=[StepRun(name="scan", status=StepStatus.RUNNING, task_id=f"task-pb-{suffix}-scan")],
            seq=1,
        ),
    )

    assert (await web.get(f"{D}/playbooks")).status_code == 401
    await sign_in(web, "U_CAROL", "viewer")
    listed = await web.get(f"{D}/playbooks", params={"name": suffix})
    assert listed.status_code == 200, listed.text
    assert f'href="{D}/playbooks"' in listed.text  # the navigation item
    row = _row(listed.text, triage)
    for shown in (
        "v2",
        "on Paged",
        "<td>3</td>",
        "FAILED",
        f'href="{D}/playbooks/runs/{failed_run}"',
        "U_BOB",
    ):
        assert shown in row, shown
    assert "retired" not in row
    cron_row = _row(listed.text, nightly)
    assert 'cron("0 3 * * *", tz="Europe/Berlin")' in cron_row and "RUNNING" in cron_row
    assert re.search(r"\d{4}-\d\d-\d\d 03:00 CES?T \(in \d+[smhd]\)", cron_row), cron_row
    gone_row = _row(listed.text, gone)
    assert "retired" in gone_row and "<td>–</td>" in gone_row  # no next run: its schedule is gone
    for params, expected in (
        ({"trigger": "cron"}, {nightly, gone}),
        ({"trigger": "event"}, {triage}),
        ({"state": "retired"}, {gone}),
        ({"state": "current"}, {triage, nightly}),
        ({"last": "failed"}, {triage}),
    ):
        page = (await web.get(f"{D}/playbooks", params={"name": suffix, **params})).text
        assert {n for n in (triage, nightly, gone) if f">{n}</a>" in page} == expected, params
    assert (await web.get(f"{D}/playbooks", params={"trigger": "webhook"})).status_code == 400

    page = await web.get(f"{D}/playbooks/{triage}")
    assert page.status_code == 200, page.text
    text = html.unescape(page.text)
    for shown in (
        "on Paged",
        f"hook</dt><dd>pager-{suffix}",
        f"in <code>{secret_env}</code>: set",
        v1.content_hash[:16],
        v2.content_hash,
        "U_ALICE",
        "U_BOB",
        f"step propose: agent fixer-{suffix} is not applied",
        "<title>investigate → propose</title>",
        "<title>investigate → notify</title>",
        "<code>verdict: enum[real, flaky]</code>",
        "<code>pull_request_url: str?</code>",
        "$2.00",
        "required",
        f'href="{D}/playbooks/runs/{failed_run}"',
        "Diff v1 → v2",
    ):
        assert shown in text, shown
    assert f"agent triager-{suffix} is not applied" not in text
    assert re.search(r'<span class="del">-\s+Propose a fix as a draft pull request\.</span>', text), text
    assert re.search(r'<span class="add">\+\s+Propose the smallest fix; open nothing\.</span>', text), text
    levels = re.findall(r"<tr>\s*<td>(\d)</td>\s*<td>\xa0*<strong>(\w+)</strong>", text)
    assert levels[0] == ("0", "investigate") and sorted(levels[1:]) == [("1", "notify"), ("1", "propose")]
    same = await web.get(f"{D}/playbooks/{triage}", params={"from": "1", "to": "1"})
    assert "No differences" in same.text and "Propose a fix as a draft pull request." in same.text
    assert (await web.get(f"{D}/playbooks/{triage}", params={"to": "9"})).status_code == 400
    assert (await web.get(f"{D}/playbooks/nope-{suffix}")).status_code == 404
    retired = await web.get(f"{D}/playbooks/{gone}")
    assert "Retired" in retired.text and "only one version was applied" in retired.text

    run = await web.get(f"{D}/playbooks/runs/{failed_run}")
    assert run.status_code == 200, run.text
    for shown in (
        f'href="{D}/tasks/task-pb-{suffix}-investigate"',
        f'href="{D}/tasks/task-pb-{suffix}-propose"',
        f'href="{D}/playbooks/{triage}?to=2"',
        '"verdict": "real"',
        "$0.0123",
        "$0.0323",
        "of $2.00",
        "the answer did not validate twice: summary is missing",
        "SKIPPED",
        "step propose failed",
        f"fixer-{suffix}",
    ):
        assert shown in html.unescape(run.text), shown
    assert TOKEN not in run.text and "abcdefgh12345678" not in run.text and "***" in run.text
    live = await web.get(f"{D}/playbooks/runs/{running_run}")
    assert "RUNNING" in live.text and "asks the running workflow" in live.text
    assert (await web.get(f"{D}/playbooks/runs/nope-{suffix}")).status_code == 404

    for shown in (listed, page, run):
        assert secret not in shown.text
