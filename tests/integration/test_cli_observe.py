"""`openloop tasks list|show`, `explain` and `replay` against the real dev server.

Tasks run the real workflow with scripted stand-in activities; the commands run as a user
would run them (CliRunner, in a thread so they get their own event loop), pointed at the
dev server by OPENLOOP_TEMPORAL_ADDRESS. Agent names are unique per test run, because the
dev server (and its visibility store) is shared by the whole session.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from tests.helpers import Handle, pending_approval
from tests.integration.dashboard_env import start_dashboard_task
from tests.integration.observe_env import Cli
from tests.workflow.record_histories import HELPER_YAML, ISSUE_ARGS, ISSUES_YAML, SEARCH_ARGS
from tests.workflow.scripted import Script, say, use
from workers.embedded import TemporalDevServer, find_binary
from workers.sandbox import workflow_runner
from workers.telemetry import worker_interceptors
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, TaskStatus


@dataclass
class Tasks:
    suffix: str
    answered: Handle  # a tool call, then an answer: SUCCESS
    waiting: Handle  # waiting for U_ALICE to approve github.create_issue
    worker: Worker


@pytest.fixture
async def tasks(client: Client, task_queue: str) -> AsyncIterator[Tasks]:
    suffix = uuid.uuid4().hex[:8]
    script = Script(
        [],
        default=lambda inp: (
            say("Tuesdays.", (210, 15), 0.0004)
            if inp.step > 1
            else use(
                "github.create_issue" if inp.task.agent_name.startswith("triage") else "memory.search",
                ISSUE_ARGS if inp.task.agent_name.startswith("triage") else SEARCH_ARGS,
                "c1",
                (150, 20),
                0.0003,
            )
        ),
    )
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=script.activities(),
        workflow_runner=workflow_runner(),
        interceptors=worker_interceptors(),
    )
    async with worker:
        answered = await start_dashboard_task(
            client, HELPER_YAML, f"helper-{suffix}", f"eng-{suffix}", task_queue, "task-cli-observe"
        )
        waiting = await start_dashboard_task(
            client, ISSUES_YAML, f"triage-{suffix}", f"ops-{suffix}", task_queue, "task-cli-observe"
        )
        assert (await answered.result()).status == TaskStatus.SUCCESS
        await pending_approval(waiting)
        yield Tasks(suffix, answered, waiting, worker)
        if (await waiting.describe()).status == WorkflowExecutionStatus.RUNNING:
            await waiting.terminate("test over")


@pytest.fixture
def cli(dev_server: TemporalDevServer) -> Cli:
    return Cli(dev_server.address)


async def test_tasks_list_filters_by_agent_status_and_channel(cli: Cli, tasks: Tasks) -> None:
    listed = await cli.until("SUCCESS", "tasks", "list", "--agent", f"helper-{tasks.suffix}")
    assert listed.exit_code == 0, listed.output
    assert tasks.answered.id in listed.output and tasks.waiting.id not in listed.output
    assert "$0.0007" in listed.output  # the cost search attribute, written when the task ended
    assert f"OpenLoopAgent = 'helper-{tasks.suffix}'" in listed.output  # the query, to reuse

    waiting = await cli.until(
        tasks.waiting.id, "tasks", "list", "--status", "waiting_approval", "--channel", f"ops-{tasks.suffix}"
    )
    assert "WAITING_APPROVAL" in waiting.output and tasks.answered.id not in waiting.output

    none = await cli("tasks", "list", "--agent", f"helper-{tasks.suffix}", "--status", "RUNNING")
    assert none.exit_code == 0 and "No tasks match" in none.output
    bad = await cli("tasks", "list", "--status", "HAPPY")
    assert bad.exit_code == 2 and "unknown status" in bad.output


async def test_tasks_show_prints_the_timeline_and_the_web_ui_link(cli: Cli, tasks: Tasks) -> None:
    shown = await cli("tasks", "show", tasks.answered.id)
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "SUCCESS: answered" in out
    assert "scripted/model: 1 tool call(s): memory.search; 150+20 tokens" in out
    assert "memory.search: ok" in out
    assert "$0.0003" in out and "$0.0004" in out and "Total cost $0.0007" in out
    assert f"http://localhost:8233/namespaces/default/workflows/{tasks.answered.id}" in out


async def test_tasks_show_and_explain_follow_an_approval_live_and_after_the_fact(
    cli: Cli, tasks: Tasks
) -> None:
    live = await cli("tasks", "show", tasks.waiting.id)
    assert live.exit_code == 0, live.output
    assert "WAITING_APPROVAL (live): waiting for U_ALICE to approve github.create_issue" in live.output
    assert f"openloop approve {tasks.waiting.id}" in live.output
    assert "asked U_ALICE to approve github.create_issue" in live.output  # from the history so far

    explained = await cli("explain", tasks.waiting.id)
    assert explained.exit_code == 0, explained.output
    assert f"{tasks.waiting.id}: WAITING_APPROVAL" in explained.output
    assert "Reason: waiting for U_ALICE to approve github.create_issue (expires" in explained.output
    assert "Decisions (from the task itself)" in explained.output

    pending = (await tasks.waiting.query(AgentTaskWorkflow.status)).pending_approval
    assert pending is not None
    await tasks.waiting.signal(
        AgentTaskWorkflow.approve, ApprovalDecision(pending.request_id, pending.action_id, "U_ALICE")
    )
    assert (await tasks.waiting.result()).status == TaskStatus.SUCCESS
    after = await cli("tasks", "show", tasks.waiting.id)
    assert "approve from U_ALICE" in after.output  # the signal, with when it came
    assert "github.create_issue approved by U_ALICE" in after.output
    assert "github.create_issue: ok" in after.output


async def test_explain_and_show_a_finished_task_with_no_worker_running(
    cli: Cli, tasks: Tasks, client: Client
) -> None:
    await tasks.worker.shutdown()
    explained = await cli("explain", tasks.answered.id)
    assert explained.exit_code == 0, explained.output
    out = explained.output
    assert f"{tasks.answered.id}: SUCCESS" in out and "Reason: answered" in out
    assert "Next: Nothing to do; for a follow-up, ask again" in out  # a CLI task has no thread
    assert "Decisions (from its recorded history)" in out
    assert "model: scripted/model: 1 tool call(s): memory.search" in out
    assert "tool: memory.search: ok" in out
    assert "stop: SUCCESS: answered" in out
    shown = await cli("tasks", "show", tasks.answered.id)
    assert shown.exit_code == 0 and "Total cost $0.0007" in shown.output

    missing = await cli("explain", "task-does-not-exist")
    assert missing.exit_code == 1 and "no task task-does-not-exist" in missing.output


async def test_replay_a_task_all_recent_tasks_and_an_exported_file(
    cli: Cli, tasks: Tasks, tmp_path: Path
) -> None:
    one = await cli("replay", tasks.answered.id)
    assert one.exit_code == 0, one.output
    assert f"OK   {tasks.answered.id}" in one.output and "1 replayed, 0 failed" in one.output

    recent = await cli("replay", "--all", "--since", "1h")
    assert recent.exit_code == 0, recent.output
    assert tasks.answered.id in recent.output and tasks.waiting.id in recent.output
    assert ", 0 failed" in recent.output

    # A history exported with the temporal CLI replays offline.
    exported = tmp_path / "exported.json"
    show = await asyncio.create_subprocess_exec(
        find_binary("temporal"),
        "workflow",
        "show",
        "--workflow-id",
        tasks.answered.id,
        "--address",
        cli.address,
        "--output",
        "json",
        stdout=asyncio.subprocess.PIPE,
    )
    stdout, _ = await show.communicate()
    assert show.returncode == 0
    exported.write_bytes(stdout)
    offline = await cli("replay", "--history", str(exported))
    assert offline.exit_code == 0, offline.output
    assert f"OK   {tasks.answered.id}" in offline.output

    both = await cli("replay", tasks.answered.id, "--all")
    assert both.exit_code == 2 and "exactly one of" in both.output
    bad_since = await cli("replay", "--all", "--since", "a week")
    assert bad_since.exit_code == 2 and "--since" in bad_since.output


async def test_a_terminated_task_lists_and_explains_as_terminated(cli: Cli, tasks: Tasks) -> None:
    await tasks.waiting.terminate(reason="stuck in review")
    listed = await cli.until("TERMINATED", "tasks", "list", "--agent", f"triage-{tasks.suffix}")
    assert tasks.waiting.id in listed.output
    explained = await cli("explain", tasks.waiting.id)
    assert explained.exit_code == 0, explained.output
    assert f"{tasks.waiting.id}: TERMINATED" in explained.output
    assert "Reason: terminated: stuck in review" in explained.output
    assert "approval: asked U_ALICE to approve github.create_issue" in explained.output
    assert "Ask again if it is still needed" in explained.output
