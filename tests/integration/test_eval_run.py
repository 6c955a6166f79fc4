"""`openloop eval run` and `openloop eval capture` against the real stack: the real worker and
activities on the dev server and Postgres, the offline and scripted models, the example agents
applied as `openloop agents apply` stores them. Each case is a real task; what the checks see
is what the task did."""

from __future__ import annotations

import asyncio
import json
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from temporalio.client import Client
from typer.testing import CliRunner, Result

from activities.store.agents import apply_agent, get_agent
from activities.store.db import get_pool
from activities.store.memory import remember
from config.loader import parse_agent
from config.settings import Settings
from surfaces.app import create_app
from surfaces.cli.main import app
from surfaces.decisions import decide
from surfaces.tasks import start_task
from tests.helpers import pending_approval
from tests.integration.dashboard_env import sign_in
from workers.worker import build_worker
from workflows.policy import memory_scope
from workflows.types import ApprovalDecision, Decision, SurfaceContext, TaskStatus

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "evals" / "examples.yaml"
EXAMPLE_AGENTS = ("minimal.yaml", "dev-platform.yaml", "security-reviewer.yaml")
MIN_EXAMPLE_CASES = 20

# A agent whose version 2 loses its memory.search tool and its approval rule for memory.save.
REGRESS_V1 = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: NAME}
spec:
  surfaces: {cli: true}
  model_policy: {default: offline/demo}
  tools:
    - {name: memory.search, permissions: ["memory:read"]}
    - {name: memory.save, permissions: ["memory:write"]}
  approvals:
    require_for: [memory.save]
    approvers: [cli:local]
"""
REGRESS_V2 = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: NAME}
spec:
  surfaces: {cli: true}
  model_policy: {default: offline/demo}
  tools:
    - {name: memory.save, permissions: ["memory:write"]}
"""
REGRESS_CASES = """
cases:
  - id: recall
    request: "What did we decide about the database?"
    context: {memories: ["We chose Postgres 16."]}
    checks:
      tools_called: [{tool: memory.search}]
      reply_contains: ["Postgres 16"]
  - id: remember-asks-first
    request: "Please remember the decision: releases are cut on Tuesdays."
    checks:
      approvals_asked: [{tool: memory.save}]
  - id: greeting
    request: "hello"
    checks:
      reply_contains: ["You asked: hello"]
"""


@pytest.fixture
async def stack(settings: Settings, client: Client) -> AsyncIterator[Settings]:
    """A worker on a fresh task queue, the example agents applied; the settings a CLI run uses."""
    here = settings.model_copy(update={"task_queue": f"tq-eval-{uuid.uuid4().hex[:8]}"})
    pool = await get_pool(here.require_database_url())
    for name in EXAMPLE_AGENTS:
        await apply_agent(pool, parse_agent((REPO / "config" / "agents" / name).read_text()))
    async with build_worker(client, here):
        yield here


def openloop(settings: Settings, *args: str) -> Result:
    env = {
        "OPENLOOP_TEMPORAL_ADDRESS": settings.temporal_address,
        "OPENLOOP_DATABASE_URL": settings.database_url or "",
        "OPENLOOP_TASK_QUEUE": settings.task_queue,
        "COLUMNS": "200",
    }
    return CliRunner().invoke(app, list(args), env=env)


async def run_eval(settings: Settings, *args: str) -> Result:
    return await asyncio.to_thread(openloop, settings, "eval", "run", *args)


def json_body(result: Result) -> dict[str, Any]:
    """The --json document (the tables go to stderr then)."""
    return dict(json.loads(result.stdout[result.stdout.index('{\n  "runs"') :]))


async def test_the_example_dataset_passes_and_gates(stack: Settings, tmp_path: Path) -> None:
    junit = tmp_path / "eval.xml"
    result = await run_eval(
        stack, str(EXAMPLES), "--min-pass-rate", "1.0", "--parallel", "4", "--junit", str(junit), "--json"
    )
    body = json_body(result)
    run = body["runs"][0]
    failed = [(r["case"], r["failed"]) for r in run["results"] if not r["passed"]]
    assert result.exit_code == 0, (failed, result.output)
    assert run["cases"] >= MIN_EXAMPLE_CASES and run["pass_rate"] == 1.0
    # Every kind of check ran, the LLM judge included (the offline judge's verdict).
    assert {"tools_called", "tools_not_called", "approvals_asked", "reply_contains", "judge"} <= set(
        run["checks"]
    )
    assert {"max_steps", "max_cost_usd", "status", "output_schema"} <= set(run["checks"])
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == str(run["cases"]) and suite.get("failures") == "0"
    # Writes to GitHub were recorded by the eval surface, not sent anywhere.
    approved = next(r for r in run["results"] if r["case"] == "dp-open-issue-approved")
    assert "recorded, not sent" in approved["reply"]
    # The run is stored for the dashboard, with each case's task.
    pool = await get_pool(stack.require_database_url())
    async with pool.connection() as conn:
        row = await (
            await conn.execute("SELECT cases, passed FROM eval_runs WHERE id = %s", (run["id"],))
        ).fetchone()
    assert row == {"cases": run["cases"], "passed": run["cases"]}


async def test_a_failing_check_is_reported_and_fails_the_gate(stack: Settings, tmp_path: Path) -> None:
    dataset = tmp_path / "failing.yaml"
    dataset.write_text(
        "agent: helper\ncases:\n"
        "  - id: greets\n    request: hello\n    checks: {reply_contains: ['You asked: hello']}\n"
        "  - id: wants-an-issue\n    request: hello again\n"
        "    checks:\n      tools_called: [{tool: github.create_issue}]\n"
        "      reply_contains: ['Filed issue #']\n"
    )
    junit = tmp_path / "junit.xml"
    result = await run_eval(
        stack, str(dataset), "--repeat", "2", "--min-pass-rate", "0.75", "--junit", str(junit)
    )
    assert result.exit_code == 1, result.output
    assert "pass rate 50% is below --min-pass-rate 75%" in result.output
    assert "tools_called[0]:github.create_issue: no tool was called" in result.output
    assert "'Filed issue #' not in the reply" in result.output
    task_id = next(line.split()[-1] for line in result.output.splitlines() if "openloop explain" in line)
    assert task_id.startswith("task-eval-") and "wants-an-issue" in task_id
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "4" and suite.get("failures") == "2"
    failing = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert {c.get("name") for c in failing} == {"wants-an-issue", "wants-an-issue #2"}
    assert all(len(c.findall("failure")) == 2 for c in failing)  # one per failed check


async def test_a_spent_budget_runs_no_more_cases(stack: Settings, tmp_path: Path) -> None:
    dataset = tmp_path / "two.yaml"
    dataset.write_text("agent: helper\ncases:\n  - {id: one, request: hello}\n  - {id: two, request: hi}\n")
    result = await run_eval(stack, str(dataset), "--budget-usd", "0", "--json")
    assert result.exit_code == 0, result.output  # no --min-pass-rate: the report is the answer
    results = json_body(result)["runs"][0]["results"]
    assert [(r["status"], r["task_id"]) for r in results] == [("SKIPPED_BUDGET", "")] * 2
    assert results[0]["failed"] == [
        {"check": "budget", "detail": "not run: the run spent its --budget-usd 0.0"}
    ]


async def test_compare_shows_what_version_2_broke(stack: Settings, tmp_path: Path) -> None:
    name = f"regress-{uuid.uuid4().hex[:6]}"
    pool = await get_pool(stack.require_database_url())
    await apply_agent(pool, parse_agent(REGRESS_V1.replace("NAME", name)))
    await apply_agent(pool, parse_agent(REGRESS_V2.replace("NAME", name)))
    dataset = tmp_path / "regress.yaml"
    dataset.write_text(REGRESS_CASES)
    result = await run_eval(
        stack, str(dataset), "--agent", name, "--compare", "1", "2", "--json", "--min-pass-rate", "1"
    )
    assert result.exit_code == 1, result.output
    body = json_body(result)
    v1, v2 = body["runs"]
    assert (v1["label"], v1["pass_rate"]) == (f"{name} v1", 1.0)
    assert v2["label"] == f"{name} v2" and v2["passed"] == 1
    regressed = {(c["case_id"], c["check"]) for c in body["changes"] if c["regressed"]}
    assert ("recall", "") in regressed and ("recall", "tools_called[0]:memory.search") in regressed
    assert ("remember-asks-first", "approvals_asked[0]:memory.save") in regressed
    assert not any(c["case_id"] == "greeting" for c in body["changes"])
    assert "Regressed (2): recall, remember-asks-first" in result.output


async def _finished_task(
    stack: Settings, client: Client, request: str, approve: bool, memory: str = ""
) -> str:
    pool = await get_pool(stack.require_database_url())
    agent = await get_agent(pool, "helper")
    assert agent is not None
    context = SurfaceContext(surface="cli", channel=f"cap-{uuid.uuid4().hex[:6]}", user="cli:local")
    if memory:
        await remember(pool, memory_scope(agent.config, context), memory, "seed", 0, uuid.uuid4().hex)
    task_id = f"task-cli-capture-{uuid.uuid4().hex[:8]}"
    handle, _ = await start_task(client, stack, agent, context, request, task_id=task_id)
    if approve:
        asked = await pending_approval(handle)
        said = ApprovalDecision(asked.request_id, asked.action_id, "cli:local")
        assert (await decide(handle, stack.database_url, Decision(approve=said))).counted
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == TaskStatus.SUCCESS, result.reason
    return task_id


async def test_a_captured_task_becomes_a_case_that_passes(
    stack: Settings, client: Client, tmp_path: Path
) -> None:
    recalled = await _finished_task(
        stack,
        client,
        "What did we decide about the queue?",
        False,
        "We picked Temporal task queues per team.",
    )
    saved = await _finished_task(stack, client, "Please remember the decision: we deploy with Argo CD.", True)
    cases = []
    for task_id in (recalled, saved):
        out = tmp_path / f"{task_id}.yaml"
        captured = await asyncio.to_thread(openloop, stack, "eval", "capture", task_id, "-o", str(out))
        assert captured.exit_code == 0, captured.output
        cases += yaml.safe_load(out.read_text())["cases"]
    recall, save = cases
    assert recall["context"]["memories"] == ["We picked Temporal task queues per team."]
    assert recall["checks"]["tools_called"] == [{"tool": "memory.search"}]
    assert save["approve"] is True and save["checks"]["approvals_asked"] == [{"tool": "memory.save"}]
    assert save["checks"]["tools_called"] == [
        {"tool": "memory.save", "args": {"content": "we deploy with Argo CD."}}
    ]
    dataset = tmp_path / "captured.yaml"
    dataset.write_text(yaml.safe_dump({"cases": cases}))
    rerun = await run_eval(stack, str(dataset), "--min-pass-rate", "1.0", "--json")
    assert rerun.exit_code == 0, rerun.output
    assert json_body(rerun)["runs"][0]["passed"] == 2


async def test_the_dashboard_lists_runs_and_shows_a_comparison(
    stack: Settings, client: Client, tmp_path: Path
) -> None:
    dataset = tmp_path / "one.yaml"
    dataset.write_text(
        "cases:\n  - id: '<b>hi</b>'\n    request: hello\n    checks: {reply_contains: ['<script>']}\n"
    )
    bad = await run_eval(stack, str(dataset), "--agent", "helper", "--json")
    assert bad.exit_code == 2 and "use lower-case letters" in bad.output  # the id is refused
    dataset.write_text("cases:\n  - id: hi\n    request: hello\n    checks: {reply_contains: ['<script>']}\n")
    result = await run_eval(
        stack, str(dataset), "--agent", "helper", "--compare", "offline/demo", "offline/demo", "--json"
    )
    run_id = json_body(result)["runs"][1]["id"]
    app_ = create_app(stack, client)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app_), base_url="http://dash.test"
    ) as http:
        assert (await http.get(f"/dashboard/evals/{run_id}")).status_code in (302, 303, 401)  # signed-in only
        http.app_settings = stack  # type: ignore[attr-defined]
        await sign_in(http, "alice", "viewer")
        listing = await http.get("/dashboard/evals")
        assert (
            listing.status_code == 200
            and run_id in listing.text
            and 'href="/dashboard/evals"' in listing.text
        )
        page = await http.get(f"/dashboard/evals/{run_id}")
        assert page.status_code == 200
        assert "&lt;script&gt;" in page.text and "<script>'" not in page.text  # the check's text, escaped
        assert "/dashboard/tasks/task-eval-" in page.text and "Changes against" in page.text
        assert (await http.get("/dashboard/evals/no-such-run")).status_code == 404
