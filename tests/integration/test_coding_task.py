"""A coding task end to end, on real Temporal, Postgres, a loop worker with bubblewrap, git's
smart HTTP and a fake GitHub: a scripted model fixes the demo project's failing test through
the coding tools; a person approves the exact diff; one branch, one commit and one draft
pull request exist. Denied, nothing is pushed; changed after the request, the old approval
executes nothing; with nothing changed, nothing is proposed.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from temporalio.client import Client
from typer.testing import CliRunner

from surfaces.cli.main import app
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import approve_when_pending, pending_approval
from tests.integration.coding_env import cloned, coding_world, result_of, script_fix
from workers.embedded import TemporalDevServer
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, TaskStatus

DELETE_TEST = {
    "path": "tests/test_calc.py",
    "old": "def test_mean() -> None:\n    assert mean([2, 4, 6]) == 4\n",
    "new": "",
}


def tool_results(api: FakeModelAPI) -> list[str]:
    last = api.requests[-1].body["messages"]
    return [str(m.get("content") or "") for m in last if m["role"] == "tool"]


def last_commit(checkout: Path) -> str:
    return subprocess.run(
        ["git", "log", "--format=%s%n%b", "-1"], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout


async def test_a_fix_becomes_one_draft_pull_request_after_one_approval(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    async with coding_world(client, pg_url, tmp_path) as world:
        script_fix(api, world.repo)
        # The commit is stored, but GitHub's answer comes after the client gave up.
        world.github.hang_after_accept("POST", f"/repos/{world.repo}/git/commits", seconds=15)
        agent = await world.agent()
        handle = await world.start(agent, f"test_mean fails on main in {world.repo}; fix it")
        pending = await approve_when_pending(handle)
        result = await result_of(handle)
        checkout = cloned(world, f"openloop/{handle.id}", tmp_path / "pushed")
        (pull,) = world.pulls()

    arguments = pending.arguments
    assert pending.tool == "github.create_pull_request"
    assert arguments["repo"] == world.repo and arguments["base"] == "main"
    assert arguments["diff"] == "1 file(s) changed, +1 −1"
    assert "-    return sum(values) / (len(values) + 1)" in str(arguments["diff_preview"])
    assert "tests/test_calc.py::test_mean" in str(arguments["tests_before"])
    assert str(arguments["tests_after"]).startswith("passed")
    assert arguments["full_diff"] == f"openloop tasks diff {handle.id}"

    assert result.status == TaskStatus.SUCCESS, result
    assert pull["draft"] is True and pull["base"]["ref"] == "main"
    assert pull["head"]["ref"] == f"openloop/{handle.id}"
    assert pull["html_url"] in result.reply
    assert "Tests before: failed: 1 failing (tests/test_calc.py::test_mean)" in pull["body"]
    assert f"Made by OpenLoop task `{handle.id}`" in pull["body"]
    assert "/ len(values)" in (checkout / "calc.py").read_text()
    log = last_commit(checkout)
    assert "Fix calc.mean" in log and handle.id in log
    # The model saw the tests fail when the workspace opened, and pass after its edit.
    seen = "\n".join(tool_results(api))
    assert "tests/test_calc.py::test_mean" in seen and "PASSED" in seen.upper()


async def test_a_denied_pull_request_pushes_nothing(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    async with coding_world(client, pg_url, tmp_path) as world:
        script_fix(api, world.repo)
        agent = await world.agent()
        handle = await world.start(agent, f"fix the failing test in {world.repo}")
        pending = await pending_approval(handle)
        await handle.signal(
            AgentTaskWorkflow.deny, ApprovalDecision(pending.request_id, pending.action_id, "cli:local")
        )
        result = await result_of(handle)
        assert world.pulls() == []
        assert world.branches() == ["main"]
    assert result.status == TaskStatus.SUCCESS  # approvals.on_denied: continue
    assert any("denied this action" in text for text in tool_results(api))


async def test_a_workspace_changed_after_the_request_voids_the_approval(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI, dev_server: TemporalDevServer
) -> None:
    async with coding_world(client, pg_url, tmp_path) as world:
        script_fix(api, world.repo)
        agent = await world.agent()
        handle = await world.start(agent, f"fix the failing test in {world.repo}")
        first = await pending_approval(handle)
        state = await handle.query(AgentTaskWorkflow.workspace_state)
        assert state is not None
        (Path(state.handle.path) / "NOTES.md").write_text("changed while the approver was away\n")
        await handle.signal(
            AgentTaskWorkflow.approve, ApprovalDecision(first.request_id, first.action_id, "cli:local")
        )
        second = await pending_approval(handle)
        while second.request_id == first.request_id:  # until the new request is posted
            second = await pending_approval(handle)
        assert world.pulls() == []  # the first approval executed nothing
        assert second.arguments["diff_sha256"] != first.arguments["diff_sha256"]
        assert second.arguments["diff"] == "2 file(s) changed, +2 −1"
        await handle.signal(
            AgentTaskWorkflow.approve, ApprovalDecision(second.request_id, second.action_id, "cli:local")
        )
        result = await result_of(handle)
        assert result.status == TaskStatus.SUCCESS, result
        assert len(world.pulls()) == 1
        explanation = await handle.query(AgentTaskWorkflow.explain)
        env = {"OPENLOOP_TEMPORAL_ADDRESS": dev_server.address, "COLUMNS": "400"}
        explained = await asyncio.to_thread(CliRunner().invoke, app, ["explain", handle.id], env=env)
    assert any("that approval is void" in decision for decision in explanation.decisions)
    # `openloop explain` names the voided approval, why, and what the task did next.
    approved, current = str(first.arguments["diff_sha256"])[:12], str(second.arguments["diff_sha256"])[:12]
    voided = (
        "approval: the approval of github.create_pull_request by cli:local is void: the workspace "
        f"changed after it was requested (approved diff {approved}, now {current}), so nothing was "
        "done with it; then it asked again, for the new diff"
    )
    assert explained.exit_code == 0 and voided in explained.output, explained.output
    out = explained.output
    assert out.index("approved by cli:local") < out.index(voided) < out.rindex("asked cli:local to approve")


async def test_a_deleted_failing_test_shows_on_the_card_as_gone_not_fixed(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    async with coding_world(client, pg_url, tmp_path) as world:
        api.answer_tool_calls([tool_call("c1", "code__open_workspace", {"repo": world.repo})])
        api.answer_tool_calls([tool_call("c2", "code__edit_file", DELETE_TEST)])
        api.answer_tool_calls([tool_call("c3", "code__run_tests", {})])
        pull = {"title": "Fix the tests", "body": "Green now."}
        api.answer_tool_calls([tool_call("c4", "github__create_pull_request", pull)])
        api.answer("Proposed.")
        agent = await world.agent()
        handle = await world.start(agent, f"make the tests pass in {world.repo}")
        pending = await pending_approval(handle)
        await handle.signal(
            AgentTaskWorkflow.deny, ApprovalDecision(pending.request_id, pending.action_id, "cli:local")
        )
        await result_of(handle)
    after = str(pending.arguments["tests_after"])
    assert str(pending.arguments["tests_before"]) == "failed: 1 failing (tests/test_calc.py::test_mean)"
    assert after.startswith("passed (2 passed"), after
    assert after.endswith(", 1 fewer than before: tests/test_calc.py::test_mean gone)"), after


async def test_nothing_is_proposed_when_the_workspace_has_no_changes(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    async with coding_world(client, pg_url, tmp_path) as world:
        script_fix(api, world.repo, edit=False)
        agent = await world.agent()
        handle = await world.start(agent, f"fix the failing test in {world.repo}")
        result = await result_of(handle)
        status = await handle.query(AgentTaskWorkflow.status)
        assert world.pulls() == []
    assert result.status == TaskStatus.SUCCESS and status.pending_approval is None
    assert any("nothing to propose" in text for text in tool_results(api))
