"""Playbook steps and what they may write, and chains of emitted events, on the real dev server,
Postgres, the ordinary worker, a real MCP server (the SDK's own, over stdio) and the scripted
model API: an MCP write in a step with `approval: required` waits for a person; applying a
playbook whose agent may write through MCP without an approval is refused; re-applying the
agent without its approvals does not un-gate a playbook applied against the stricter one; and
two playbooks that emit each other's events start at most `MAX_RUNS_PER_EVENT` runs for one
outside event."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from temporalio.client import Client
from temporalio.service import RPCError

from activities.playbooks.starts import start_listening
from activities.store import playbooks as playbook_rows
from activities.store.agents import apply_agent
from config.agent import AgentConfig
from surfaces.cli.playbook_runs import apply_folder
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import eventually_async, pending_approval
from tests.integration.playbook_env import MODEL, PlaybookWorld, on_event, playbook, playbook_world
from workflows.agent_task import AgentTaskWorkflow
from workflows.playbook_calls import MAX_RUNS_PER_EVENT
from workflows.playbook_types import PlaybookRunStatus, PlaybookStep, StepStatus
from workflows.types import ApprovalDecision

APPROVER = "cli:local"


def notes_agent(name: str, state: Path, **approvals: Any) -> AgentConfig:
    """An agent whose only tools are the test MCP server's: `create_note` writes."""
    server = {
        "name": "notes",
        "transport": "stdio",
        "command": [sys.executable, "-m", "tests.fakes.mcp_servers", "stdio", str(state)],
        "allow": ["read_note", "create_note"],
        "writes": ["create_note"],
    }
    return AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name},
            "spec": {
                "model_policy": {"default": MODEL, "max_output_tokens": 256},
                "mcp_servers": [server],
                "approvals": {"approvers": [APPROVER], **approvals},
            },
        }
    )


def notes_written(state: Path) -> list[str]:
    log = state / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def write_folder(root: Path, world: PlaybookWorld, agent: str, event: str, approval: str = "") -> str:
    """A playbooks folder: one playbook whose step asks `agent` to write a note on `event`."""
    name = world.name("notes")
    (root / name).mkdir(parents=True)
    hook = f"notes-{world.suffix}"
    (root / "registry.yaml").write_text(
        f"events:\n  {event}:\n    fields: {{title: str}}\n"
        f"    webhook: {{hook: {hook}, secret_env: NOTES_HOOK_SECRET}}\n"
    )
    extra = f"approval: {approval}\n" if approval else ""
    (root / name / "write.md").write_text(
        f"---\non: {event}\nagent: {agent}\n{extra}---\nWrite the note {{{{ event.title }}}}.\n"
    )
    return name


async def applied(world: PlaybookWorld, folder: Path) -> tuple[bool, str]:
    """`openloop playbooks apply --dir folder`, below the command line: (ok, what it said)."""
    out = io.StringIO()
    console = Console(file=out, width=400, highlight=False, soft_wrap=True)
    ok = await apply_folder(await world.pool(), world.client, folder, world.settings.task_queue, out=console)
    return ok, out.getvalue()


async def test_an_mcp_write_in_a_step_with_approval_required_waits_for_a_person(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    state = tmp_path / "notes"
    state.mkdir()
    api.answer_tool_calls([tool_call("w", "notes__create_note", {"title": "Deploy freeze"})])
    api.answer("Wrote the note.")
    async with playbook_world(client, pg_url, tmp_path) as world:
        agent, _ = await apply_agent(await world.pool(), notes_agent(world.name("noter"), state))
        asked = f"Asked_{world.suffix}"
        step = PlaybookStep(
            name="write", agent=agent.name, instructions="Write the note.", approval="required"
        )
        name = world.name("notes")
        await world.apply([playbook(name, on_event(asked), step)])
        started = await start_listening(
            client, await world.pool(), world.settings.task_queue, asked, {}, "req-1"
        )
        task = client.get_workflow_handle(f"{started.started[0]}.write")

        async def task_started() -> bool:
            try:
                await task.describe()
            except RPCError:
                return False
            return True

        await eventually_async(task_started, "the step's task", within=60)
        pending = await pending_approval(task, within=60)
        before = notes_written(state)
        await task.signal(
            AgentTaskWorkflow.approve, ApprovalDecision(pending.request_id, pending.action_id, APPROVER)
        )
        run = await world.finished_run(name)

    assert pending.tool == "notes.create_note" and pending.arguments == {"title": "Deploy freeze"}
    assert before == []  # nothing was written before the approval
    assert run.record.status is PlaybookRunStatus.SUCCEEDED, run.record.reason
    assert notes_written(state) == ["Deploy freeze"]


async def test_applying_a_playbook_whose_agent_writes_through_mcp_without_an_approval_is_refused(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    async with playbook_world(client, pg_url, tmp_path) as world:
        agent, _ = await apply_agent(await world.pool(), notes_agent(world.name("noter"), tmp_path))
        event = f"Asked_{world.suffix}"
        ungated = tmp_path / "ungated"
        name = write_folder(ungated, world, agent.name, event)
        refused, said = await applied(world, ungated)
        required = tmp_path / "required"
        write_folder(required, world, agent.name, event, approval="required")
        gated, said_gated = await applied(world, required)
        stored = await playbook_rows.get_playbook(await world.pool(), name)

    assert not refused and "nothing applied" in said, said
    assert f"agent '{agent.name}' may call notes.create_note, which write" in said, said
    assert "without an approval" in said and f"{name}/write.md" in said, said
    assert gated, said_gated  # the same step with `approval: required` applies
    assert stored is not None and stored.steps[0].approval == "required"


async def test_re_applying_the_agent_without_its_approvals_does_not_ungate_an_applied_playbook(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    state = tmp_path / "notes"
    state.mkdir()
    api.answer_tool_calls([tool_call("w", "notes__create_note", {"title": "Unreviewed"})])
    api.answer("Wrote the note.")
    async with playbook_world(client, pg_url, tmp_path) as world:
        pool = await world.pool()
        agent_name = world.name("noter")
        strict, _ = await apply_agent(pool, notes_agent(agent_name, state, require_for=["notes.create_*"]))
        event = f"Asked_{world.suffix}"
        folder = tmp_path / "playbooks"
        name = write_folder(folder, world, agent_name, event)
        ok, said = await applied(world, folder)
        assert ok, said  # the step follows the agent's approvals, which gate every MCP write
        loose, _ = await apply_agent(pool, notes_agent(agent_name, state))
        await start_listening(client, pool, world.settings.task_queue, event, {"title": "x"}, "req-2")
        run = await world.finished_run(name)

    assert (strict.version, loose.version) == (1, 2)
    record = run.record
    step = record.steps[0]
    assert record.status is PlaybookRunStatus.FAILED and step.status is StepStatus.FAILED
    assert step.reason.startswith(f"agent '{agent_name}' cannot run this step: "), step.reason
    assert (
        "its applied version 2 may call notes.create_note, which write, without an approval, and the "
        "step says `approval: agent`; add `approval: required` to the step, or list them in the agent's "
        "spec.approvals.require_for and apply the agent again"
    ) in step.reason
    assert notes_written(state) == [] and api.requests == []  # the step's agent never ran


async def test_two_playbooks_emitting_each_others_events_start_at_most_the_cap_for_one_event(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    """A on Y has two steps that each emit X; B on X emits Y: unchecked, one event would start
    1 + 2 + 2 + 4 + 4 + 8 = 21 runs before the depth limit stopped the chain. The model
    answers "ok" to every step."""
    async with playbook_world(client, pg_url, tmp_path) as world:
        agent = await world.agent()
        ping, pong = f"Ping_{world.suffix}", f"Pong_{world.suffix}"
        first, second = world.name("ping"), world.name("pong")
        await world.apply(
            [
                playbook(
                    first,
                    on_event(pong),
                    PlaybookStep(name="left", agent=agent, instructions="Ping.", emits=ping),
                    PlaybookStep(name="right", agent=agent, instructions="Ping.", emits=ping),
                ),
                playbook(
                    second,
                    on_event(ping),
                    PlaybookStep(name="back", agent=agent, instructions="Pong.", emits=pong),
                ),
            ]
        )
        pool = await world.pool()
        await start_listening(client, pool, world.settings.task_queue, pong, {}, "signed-request-1")

        async def runs() -> list[playbook_rows.StoredRun]:
            return [
                *await playbook_rows.list_runs(pool, first),
                *await playbook_rows.list_runs(pool, second),
            ]

        async def settled() -> bool:
            found = await runs()
            assert len(found) <= MAX_RUNS_PER_EVENT, [r.record.run_id for r in found]
            done = all(r.record.status is not PlaybookRunStatus.RUNNING for r in found)
            return len(found) == MAX_RUNS_PER_EVENT and done

        await eventually_async(settled, f"{MAX_RUNS_PER_EVENT} finished runs", within=240)
        await asyncio.sleep(3)  # a start past the cap would show by now
        final = await runs()

    assert len(final) == MAX_RUNS_PER_EVENT
    assert all(r.record.status is PlaybookRunStatus.SUCCEEDED for r in final), [r.record for r in final]
    reasons = [step.reason for r in final for step in r.record.steps]
    refusal = f"one outside event starts at most {MAX_RUNS_PER_EVENT} playbook runs"
    refused = [reason for reason in reasons if refusal in reason]
    assert refused, reasons
    assert all(reason.startswith((f"emitted {ping}: ", f"emitted {pong}: ")) for reason in refused)
    assert f"runs and {pong}/signed-request-1 has started them all" in refused[0], refused
