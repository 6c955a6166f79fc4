"""`openloop tasks export` of a real run on the stack: the real worker and activities, real
Postgres, and a model reached through LiteLLM at a local server speaking OpenAI's wire (so
the messages the export says were sent can be checked against what the server received).

The run asks to remember a note (an approval, approved through the decision update), then
searches memory (a read-only call folded into the next model call), makes a call the policy
refuses, then delegates to a subagent (a child task), then answers. A GitHub token, a Slack
token and a bearer header are in the request, the tool arguments, the tool results, the
model's messages and its answers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner, Result

from activities.store.ledger import mask_secrets
from config.settings import Settings
from surfaces import task_export_format as fmt
from surfaces.cli.main import app
from surfaces.cli.task_export import build_export
from surfaces.decisions import decide
from surfaces.task_export_format import dump_export, load_export
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import pending_approval
from tests.reliability.harness import FAKE_OPENAI_KEY, agent_config, start, stored
from tests.reliability.test_continue_as_new import STEP_COST, step_answer, task
from tests.workflow.scripted import Script
from tests.workflow.task_env import start as start_scripted
from tests.workflow.task_env import worker
from workers.worker import build_worker
from workflows.types import ApprovalDecision, Decision, TaskStatus

GITHUB_TOKEN = "ghp_" + "Z9y8" * 9
SLACK_TOKEN = "xoxb-1234-5678-" + "q7" * 10
BEARER = "eyJhbGciOi" + "k3" * 10
SECRETS = (GITHUB_TOKEN, SLACK_TOKEN, BEARER)
SCHEMA = json.loads(Path(fmt.__file__).with_name("task_export.schema.json").read_text())


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelAPI]:
    api = FakeModelAPI().start()
    monkeypatch.setenv("OPENLOOP_MODEL_API_BASE", api.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    yield api
    api.stop()


def invoke(settings: Settings, *args: str) -> Result:
    env = {
        "OPENLOOP_TEMPORAL_ADDRESS": settings.temporal_address,
        "OPENLOOP_DATABASE_URL": settings.database_url or "",
        "SOURCE_DATE_EPOCH": "1767225600",
    }
    return CliRunner().invoke(app, ["tasks", "export", *args], env=env)


def export(settings: Settings, *args: str) -> str:
    result = invoke(settings, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


async def test_an_unknown_task_or_format_is_one_line_and_an_exit_code(settings: Settings) -> None:
    missing = await asyncio.to_thread(invoke, settings, "task-nobody-started")
    assert missing.exit_code == 1 and "no task task-nobody-started" in missing.output
    assert not missing.stdout.strip()
    wrong = await asyncio.to_thread(invoke, settings, "task-x", "--format", "csv")
    assert wrong.exit_code == 2 and "use one of ndjson" in wrong.output


async def test_a_real_run_exports_whole_masked_valid_and_round_trips(
    client: Client, settings: Settings, task_queue: str, model: FakeModelAPI
) -> None:
    settings = settings.model_copy(update={"task_queue": task_queue})
    agent = await stored(
        settings.require_database_url(),
        agent_config(
            tools=[
                {"name": "memory.save", "permissions": ["memory:write"]},
                {"name": "memory.search", "permissions": ["memory:read"]},
                {"name": "agent.delegate", "permissions": ["agents:delegate"]},
            ],
            approvals={"require_for": ["memory.save"], "approvers": ["cli:test"]},
        ),
    )
    note = f"deploy creds: {GITHUB_TOKEN} and {SLACK_TOKEN}"
    model.answer_tool_calls([tool_call("call_1", "memory__save", {"content": note})])
    search = {"query": f"Authorization: Bearer {BEARER}", "k": 3}
    bad = {"query": "again", "api_token": BEARER}  # an argument the tool does not take: refused
    model.answer_tool_calls([tool_call("call_2", "memory__search", search)])
    model.answer_tool_calls([tool_call("call_x", "memory__search", bad)])
    model.answer_tool_calls([tool_call("call_3", "agent__delegate", {"task": f"check {GITHUB_TOKEN}"})])
    model.answer(f"child: checked, {SLACK_TOKEN} is fine")
    model.answer(f"Done. Send `Authorization: Bearer {BEARER}` with {GITHUB_TOKEN}.")

    async with build_worker(client, settings):
        handle = await start(client, task_queue, agent, f"remember our deploy token {GITHUB_TOKEN}")
        asked = await pending_approval(handle)
        answer = ApprovalDecision(asked.request_id, asked.action_id, "cli:test")
        assert (await decide(handle, settings.database_url, Decision(approve=answer))).counted
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == TaskStatus.SUCCESS, result.reason
    assert len(model.requests) == 6
    sent = json.dumps([request.body for request in model.requests])
    assert all(secret in sent for secret in SECRETS)  # the secrets really went through the run

    text = await asyncio.to_thread(export, settings, handle.id)
    for secret in SECRETS:
        assert secret not in text
    lines = text.splitlines()
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for line in lines:
        validator.validate(json.loads(line))

    # Typed records, re-serialised byte for byte; numbered and in time order.
    done = load_export(lines)
    assert dump_export(done) == text
    assert done.header.task_id == handle.id and done.header.agent == agent.name
    assert done.header.exported_at == "2026-01-01T00:00:00.000000Z"
    assert [r.seq for r in done.records] == list(range(1, len(done.records) + 1))
    assert [r.at for r in done.records] == sorted(r.at for r in done.records)
    types = [r.type for r in done.records]
    assert types[0] == "task" and types[-1] == "end"
    for kind in (
        "step",
        "model_call",
        "tool_call",
        "approval_requested",
        "approval_decided",
        "signal",
        "child",
    ):
        assert kind in types, kind

    calls = [r for r in done.records if isinstance(r, fmt.ModelCallRecord)]
    tools = {r.tool: r for r in done.records if isinstance(r, fmt.ToolCallRecord) and r.ran != "refused"}
    # The messages as sent: what the server received, masked the same way.
    for call, request in zip(calls, [model.requests[i] for i in (0, 1, 2, 3, 5)], strict=True):
        sent = [(m["role"], m.get("content")) for m in mask_secrets(request.body["messages"])]
        assert [(m["role"], m.get("content")) for m in call.messages or []] == sent
    assert calls[0].provider == "openai" and calls[0].latency_ms is not None
    assert calls[0].output.tool_calls[0].arguments == {"content": "deploy creds: *** and ***"}
    assert tools["memory.search"].ran == "folded"
    assert tools["memory.search"].arguments == {"query": "Authorization: ***", "k": 3}
    assert tools["memory.save"].ran == "local" and tools["memory.save"].ok
    assert tools["memory.save"].approved_by == "cli:test"
    assert "***" in tools["memory.search"].result
    refused = next(r for r in done.records if isinstance(r, fmt.ToolCallRecord) and r.ran == "refused")
    assert (refused.call_id, refused.step, refused.ok, refused.error_kind) == ("call_x", 3, False, "refused")
    assert refused.arguments == {"query": "again", "api_token": "***"} and "api_token" in refused.result
    decided = next(r for r in done.records if isinstance(r, fmt.ApprovalDecidedRecord))
    assert (decided.tool, decided.outcome, decided.decided_by) == ("memory.save", "approved", "cli:test")
    signal = next(r for r in done.records if isinstance(r, fmt.SignalRecord))
    assert (signal.name, signal.via, signal.by, signal.counted) == ("approve", "update", "cli:test", True)
    child = next(r for r in done.records if isinstance(r, fmt.ChildRecord))
    assert child.role == "subagent" and child.status == "SUCCESS" and child.request == "check ***"
    end = done.records[-1]
    assert isinstance(end, fmt.EndRecord) and end.status == "SUCCESS" and end.model_calls == 5
    assert end.tool_calls == 3  # saved, searched, refused
    # The task's budget counts its child's spend too, as the end record says.
    assert end.cost_usd == pytest.approx(sum(c.cost_usd for c in calls) + (child.cost_usd or 0))
    assert end.cost_usd > 0

    # The same finished task exports the same bytes; its child's records join with the flag.
    assert await asyncio.to_thread(export, settings, handle.id) == text
    tree = load_export((await asyncio.to_thread(export, settings, handle.id, "--with-children")).splitlines())
    assert tree.header.with_children
    mine = [r for r in tree.records if r.task_id == child.child_task_id]
    assert [r.type for r in mine][0] == "task" and mine[-1].type == "end"
    child_call = next(r for r in mine if isinstance(r, fmt.ModelCallRecord))
    assert child_call.output.text == "child: checked, *** is fine"
    assert [r.seq for r in tree.records] == list(range(1, len(tree.records) + 1))
    assert [r.at for r in tree.records] == sorted(r.at for r in tree.records)
    every_call = [r for r in tree.records if isinstance(r, fmt.ModelCallRecord)]
    assert end.tokens_in == sum(c.tokens_in for c in every_call) and len(every_call) == 6


async def test_a_task_that_continued_as_new_exports_as_one_run(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=step_answer(7))
    inp = task(iterations=20, steps_per_run=3)  # runs of 3 steps: 3 runs for 7 steps
    async with worker(ts_env, script, task_queue):
        handle = await start_scripted(ts_env, inp, task_queue)
        result = await handle.result()
    first = (await ts_env.client.get_workflow_handle(inp.task_id).fetch_history()).events[0]
    assert result.steps == 7 and first.workflow_execution_started_event_attributes.continued_execution_run_id

    done = await build_export(ts_env.client, None, inp.task_id, False, "2026-01-01T00:00:00.000000Z")
    types = [r.type for r in done.records]
    assert types.count("task") == 1 and types.count("end") == 1 and types[-1] == "end"
    calls = [r for r in done.records if isinstance(r, fmt.ModelCallRecord)]
    assert [c.step for c in calls] == list(range(1, 8))
    end = done.records[-1]
    assert isinstance(end, fmt.EndRecord) and end.status == "SUCCESS" and end.model_calls == 7
    assert end.cost_usd == pytest.approx(7 * STEP_COST)
