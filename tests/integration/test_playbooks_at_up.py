"""`openloop up` applies a ./playbooks folder where it runs, on the real dev server and Postgres:
a folder with a compile error is reported with its file and line and applies nothing (the
stack goes on without it), and no folder is no work at all. (The folder applied for real, its
schedule created, is in `test_playbooks_on_embedded_stack`.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.client import Client

from activities.store import playbooks as playbook_rows
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.cli.playbooks import EXAMPLES
from workers.up import apply_playbooks_at_start


async def test_a_folder_with_an_error_is_reported_and_nothing_is_applied(
    client: Client, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "playbooks")
    propose = tmp_path / "playbooks" / "ci-triage" / "propose.md"
    propose.write_text(propose.read_text().replace("after: investigate", "after: investigte"))
    monkeypatch.chdir(tmp_path)
    settings = Settings(database_url=pg_url, state_dir=tmp_path / "state", task_queue="tq-up-playbooks")
    before = {p.name for p in await playbook_rows.latest_playbooks(await get_pool(pg_url))}
    out = Console(record=True, width=200)

    applied = await apply_playbooks_at_start(client, settings, pg_url, out)

    said = out.export_text()
    assert applied is False, said
    assert "applying the playbooks in ./playbooks" in said
    assert "playbooks/ci-triage/propose.md:2: after: no step 'investigte'" in said, said
    assert "nothing applied" in said and "the stack runs without them" in said, said
    assert "openloop playbooks apply" in said
    assert {p.name for p in await playbook_rows.latest_playbooks(await get_pool(pg_url))} == before


async def test_no_folder_is_no_work(
    client: Client, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings(database_url=pg_url, state_dir=tmp_path / "state")
    out = Console(record=True, width=200)
    assert await apply_playbooks_at_start(client, settings, pg_url, out) is None
    assert out.export_text() == ""
