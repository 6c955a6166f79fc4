"""The model boundary as a contract, in each provider's wire format (OpenAI Chat Completions,
Anthropic Messages, Ollama's chat), through LiteLLM's real provider code: every kind of tool
a task may offer is in the request exactly when the workflow offers it, with the schema the
catalog declares, and the model's call to it reaches its effect — a memory saved, two MCP
servers called in one turn, a skill and its file read, a subagent with the explore profile,
a teammate, a repair loop started, a workspace opened and edited, tests run, one draft pull
request opened after one approval. The skills, subagent and coding walkthroughs of the
README, each with a scripted model in each format.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from temporalio.client import Client

from activities.tools.catalog import SPECS
from tests.fakes.mcp_servers import start_http
from tests.fakes.model_api import FakeModelAPI, Recorded, tool_call
from tests.helpers import approve_when_pending
from tests.integration.coding_env import FIX, coding_world, result_of
from tests.integration.contract_env import LOOP, SKILL_BODY, SKILL_NOTES, WIRES, Wire, contract_team
from tests.integration.mcp_env import SECRET
from workers.embedded import free_port
from workflows.loop_types import LoopResult, LoopStatus
from workflows.tool_catalog import model_tool_name
from workflows.types import TaskStatus
from workflows.untrusted import unwrap

# What the agent is offered before a workspace is held: its native grants in order, then
# the MCP tools its servers listed, its skills' tools, delegation, a teammate, opening a
# workspace. The workspace's tools (and the pull request) join once one is held.
BEFORE_WORKSPACE = {
    "memory.save",
    "memory.search",
    "loop.start",
    "notes.read_note",
    "notes.create_note",
    "web.whoami",
    "skill.load",
    "skill.read",
    "agent.delegate",
    "agent.ask_teammate",
    "code.open_workspace",
}
WORKSPACE = {
    "code.read_file",
    "code.search",
    "code.diff",
    "code.edit_file",
    "code.run_tests",
    "code.run",
    "github.create_pull_request",
}
# Once a workspace is held: its tools instead of opening one.
HOLDING = BEFORE_WORKSPACE - {"code.open_workspace"} | WORKSPACE
# What the explore profile leaves a subagent: the parent's native tools that only read, and
# its skills (no MCP tool: an MCP server's tools are not known to only read).
EXPLORE = {"memory.search", "code.open_workspace", "skill.load", "skill.read"}


@pytest.fixture
def mcp_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    port = free_port()
    monkeypatch.setenv("TEST_MCP_AUTH", SECRET)
    process = start_http(tmp_path / "mcp", port, SECRET)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)


def offered(request: Recorded) -> set[str]:
    return {name.replace("__", ".", 1) for name in request.offered_tools()}


def results(request: Recorded, before: Recorded | None = None) -> list[str]:
    """The tool results `request` carried that the one `before` it did not."""
    seen = {call_id for call_id, _ in before.tool_results()} if before is not None else set()
    return [unwrap(content) for call_id, content in request.tool_results() if call_id not in seen]


def script(api: FakeModelAPI, team_skill: str, teammate: str, repo: str) -> None:
    """The parent's turns, with the subagent's and the teammate's answers where they come."""
    calls = [
        [tool_call("c1", "memory__save", {"content": "The ledger stays on Postgres 16."})],
        [  # two servers in one turn
            tool_call("c2", "notes__create_note", {"title": "contract", "body": "written by the model"}),
            tool_call("c3", "web__whoami", {}),
        ],
        [tool_call("c4", "skill__load", {"name": team_skill})],
        [tool_call("c5", "skill__read", {"name": team_skill, "path": "notes.md"})],
        [tool_call("c6", "agent__delegate", {"task": "Find where mean() is defined", "profile": "explore"})],
    ]
    for turn in calls:
        api.answer_tool_calls(turn)
    api.answer("The subagent found mean() in calc.py.")
    api.answer_tool_calls(
        [tool_call("c7", "agent__ask_teammate", {"teammate": teammate, "question": "Safe?"})]
    )
    api.answer("The teammate says: safe to change.")
    for turn in [
        [tool_call("c8", "loop__start", {"loop": LOOP})],
        [tool_call("c9", "code__open_workspace", {"repo": repo})],
        [tool_call("c10", "code__edit_file", FIX)],
        [tool_call("c11", "code__run_tests", {})],
        [tool_call("c12", "github__create_pull_request", {"title": "Fix calc.mean", "body": "Divide by n."})],
    ]:
        api.answer_tool_calls(turn)
    api.answer("Done: the fix is proposed.")


@pytest.mark.parametrize("wire", WIRES, ids=[wire.name for wire in WIRES])
async def test_every_tool_is_offered_when_it_should_be_and_reaches_its_effect(
    wire: Wire,
    client: Client,
    pg_url: str,
    tmp_path: Path,
    mcp_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeModelAPI().start()
    for name, value in wire.environment(api).items():
        monkeypatch.setenv(name, value)
    try:
        async with coding_world(client, pg_url, tmp_path) as world:
            team = await contract_team(world, wire, tmp_path, mcp_url)
            script(api, team.skill, team.teammate, world.repo)
            handle = await world.start(team.agent, f"test_mean fails in {world.repo}; fix it")
            pending = await approve_when_pending(handle)
            result = await asyncio.wait_for(result_of(handle), 120)
            started = results(api.requests[9], api.requests[8])[0]
            loop_id = started.split()[3].rstrip(":")
            loop = await client.get_workflow_handle(loop_id, result_type=LoopResult).result()
            pulls = world.pulls()
    finally:
        api.stop()

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert (
        result.reply.startswith("Done: the fix is proposed.")
        and "Draft pull request: https://" in result.reply
    )
    requests = api.requests
    assert {request.wire for request in requests} == {wire.name}
    child, teammate = requests[5], requests[7]  # each answered once, when the parent asked
    parent = [request for request in requests if request not in (child, teammate)]
    assert len(parent) == 12

    # Offered exactly when the workflow offers it, with the catalog's schema.
    assert [offered(request) for request in parent] == [BEFORE_WORKSPACE] * 8 + [HOLDING] * 4
    assert offered(child) == EXPLORE
    assert offered(teammate) == set()  # granted nothing
    schemas = parent[-1].offered_schemas()
    for name in HOLDING:
        if name in SPECS:
            assert schemas[model_tool_name(name)] == SPECS[name].parameters, name

    # Each call reached its effect, and the model was told.
    told = [results(request, before) for before, request in zip([None, *parent], parent, strict=False)]
    assert told[0] == [] and told[1] == ["Saved to channel memory: The ledger stays on Postgres 16."]
    assert told[2] == ["Created note #1: contract", "authorized"]  # two servers, one turn
    assert SKILL_BODY in told[3][0] and told[4] == [SKILL_NOTES]
    assert told[5][0].startswith("Subagent SUCCESS") and "mean() in calc.py" in told[5][0]
    assert teammate.system_text() and "safe to change" in told[6][0] and team.teammate in told[6][0]
    assert told[7][0].startswith(f"Started repair loop {loop_id}")
    assert loop.status is LoopStatus.SUCCESS
    assert told[8][0].startswith("Workspace open:") and "1 failing" in told[8][0]
    assert told[9][0].startswith("Edited calc.py")
    assert told[10][0].startswith("PASSED")
    assert told[11][0].startswith("Opened draft pull request #1")
    assert pending.tool == "github.create_pull_request"
    assert len(pulls) == 1 and pulls[0]["draft"] is True
    assert (team.mcp_state / "calls.log").read_text().splitlines() == ["contract"]  # written once
    with psycopg.connect(pg_url) as conn:
        saved = conn.execute(
            "SELECT count(*) FROM memories WHERE content = %s", ("The ledger stays on Postgres 16.",)
        ).fetchone()
        costs = conn.execute(
            "SELECT count(*), sum(cost_usd) FROM usage_ledger WHERE task_id = %s AND key LIKE 'model:%%'",
            (handle.id,),
        ).fetchone()
        priced_steps = conn.execute(
            "SELECT cost_usd FROM usage_ledger WHERE task_id = %s AND key LIKE 'model:%%' ORDER BY step",
            (handle.id,),
        ).fetchall()
    assert saved is not None and saved[0] >= 1
    assert costs is not None and costs[0] == len(parent)
    assert (costs[1] > 0) == wire.priced
    if wire.priced:  # the card's estimate is the ledger's cost a step, for the steps left
        steps_left = int(pending.estimate_note.split()[0])
        asked_before = [float(row[0]) for row in priced_steps[: len(parent) - 1]]
        per_step = sum(asked_before) / len(asked_before)
        assert pending.estimated_cost_usd == pytest.approx(per_step * steps_left, rel=1e-6)
