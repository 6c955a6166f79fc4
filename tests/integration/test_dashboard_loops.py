"""The read-only Loops pages against real Postgres: the list with status, rounds and the last
round's verdict, and a loop's page with its rounds and its stored diff. Loops are written
through the store the loop workflow's activities use."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from temporalio.client import Client

from activities.store import loops as loop_rows
from activities.store.db import get_pool
from config.loop import parse_loop, starter_loop_text
from config.settings import Settings
from surfaces.app import create_app
from tests.integration.dashboard_env import sign_in
from workflows.egress_report import AllowedEgress, BlockedEgress, EgressReport
from workflows.loop_types import (
    CommandResult,
    DiffSnapshot,
    LoopResult,
    LoopStatus,
    Outcome,
    RoundReport,
    RoundVerdict,
    Step,
)

D = "/dashboard"
PATCH = (
    b"--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n"
    b"-    return total / (len(xs) - 1)\n+    return total / len(xs)\n"
)


@pytest.fixture
async def web(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dash.test") as http:
        http.app_settings = settings  # type: ignore[attr-defined]
        yield http


def _round(
    loop_id: str, number: int, verdict: RoundVerdict, failing: list[str], diff: DiffSnapshot | None
) -> RoundReport:
    outcome = Outcome.PASSED if verdict is RoundVerdict.PASSED else Outcome.FAILED
    command = CommandResult(
        step=Step.VERIFY,
        round=number,
        command="pytest -q",
        outcome=outcome,
        exit_code=0 if outcome is Outcome.PASSED else 1,
        duration_s=2.5,
        output_bytes=120,
        output_id=None,
        tail="",
        failing_tests=failing,
    )
    return RoundReport(
        loop_id=loop_id,
        round=number,
        commands=[command],
        failing_tests=failing,
        fixed_tests=[] if failing else ["test_mean"],
        verdict=verdict,
        diff=diff,
        worker="loop-worker-1",
    )


async def test_loops_list_and_a_loop_with_its_rounds_and_diff(web: httpx.AsyncClient, pg_url: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    pool = await get_pool(pg_url)
    spec = parse_loop(starter_loop_text(), "loop.yaml", "/tmp")
    spec = spec.model_copy(update={"name": f"mean-{suffix}"})
    fixed, stuck = f"loop-fixed-{suffix}", f"loop-running-{suffix}"
    await loop_rows.start(pool, fixed, spec, "U_ALICE")
    await loop_rows.start(pool, stuck, spec, "cli:local")
    sha = await loop_rows.save_diff(pool, PATCH)
    snapshot = DiffSnapshot(sha256=sha, files_changed=1, insertions=1, deletions=1)
    await loop_rows.record_round(pool, _round(fixed, 1, RoundVerdict.FAILED, ["test_mean"], None))
    await loop_rows.record_round(pool, _round(fixed, 2, RoundVerdict.PASSED, [], snapshot))
    await loop_rows.finish(
        pool,
        LoopResult(
            loop_id=fixed,
            status=LoopStatus.SUCCESS,
            reason="all tests pass",
            next_action="open a pull request",
            rounds=2,
            diff=snapshot,
        ),
    )

    assert (await web.get(f"{D}/loops")).status_code == 401
    await sign_in(web, "U_CAROL", "viewer")
    listed = await web.get(f"{D}/loops", params={"name": f"mean-{suffix}"})
    assert listed.status_code == 200, listed.text
    rows = {line for line in listed.text.split("<tr>") if suffix in line}
    done = next(row for row in rows if fixed in row)
    running = next(row for row in rows if stuck in row)
    for shown in (
        "SUCCESS",
        "<td>2</td>",
        "<td>passed</td>",
        "U_ALICE",
        "all tests pass",
        f'href="{D}/loops/{fixed}"',
    ):
        assert shown in done, shown
    assert "RUNNING" in running and "<td>0</td>" in running and "<td>–</td>" in running
    only_running = await web.get(f"{D}/loops", params={"name": f"mean-{suffix}", "status": "running"})
    assert stuck in only_running.text and fixed not in only_running.text
    assert (await web.get(f"{D}/loops", params={"status": "BOGUS"})).status_code == 400

    page = await web.get(f"{D}/loops/{fixed}")
    assert page.status_code == 200
    for shown in (
        "Round 1: failed",
        "Round 2: passed",
        "pytest -q",
        "Failing: test_mean",
        "Fixed: test_mean",
        "open a pull request",
        "loop-worker-1",
    ):
        assert shown in page.text, shown
    assert '<span class="add">+    return total / len(xs)</span>' in page.text
    assert '<span class="del">-    return total / (len(xs) - 1)</span>' in page.text
    waiting = await web.get(f"{D}/loops/{stuck}")
    assert "No finished rounds yet." in waiting.text and "No stored diff." in waiting.text
    assert (await web.get(f"{D}/loops/loop-nope-{suffix}")).status_code == 404


async def test_a_loops_page_names_what_each_command_was_refused_and_what_it_reached(
    web: httpx.AsyncClient, pg_url: str
) -> None:
    suffix = uuid.uuid4().hex[:8]
    pool = await get_pool(pg_url)
    spec = parse_loop(starter_loop_text(), "loop.yaml", "/tmp")
    loop_id = f"loop-egress-{suffix}"
    await loop_rows.start(pool, loop_id, spec.model_copy(update={"name": f"egress-{suffix}"}), "U_ALICE")
    egress = EgressReport(
        allowlist=["pypi.org"],
        blocked=[BlockedEgress(host="evil.example", port=443, reason="not in the allowlist", count=3)],
        allowed=[AllowedEgress(host="pypi.org", port=443, connections=2, bytes_in=1_200_000)],
    )
    report = _round(loop_id, 1, RoundVerdict.FAILED, ["test_mean"], None)
    verify = report.commands[0].model_copy(update={"egress": egress})
    await loop_rows.record_round(pool, report.model_copy(update={"commands": [verify]}))

    await sign_in(web, "U_CAROL", "viewer")
    page = await web.get(f"{D}/loops/{loop_id}")
    assert page.status_code == 200, page.text
    assert (
        '<li class="blocked">blocked: evil.example:443 from `pytest` ×3 (not in the allowlist)</li>'
        in page.text
    )
    assert '<li class="allowed">allowed: pypi.org 1.2 MB</li>' in page.text
