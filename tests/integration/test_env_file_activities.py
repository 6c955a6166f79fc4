"""`sandbox.env_file` through the activities, with real bubblewrap and real Postgres: a loop's
command and a coding task's `code.run` see the file's keys, and its values appear in nothing
the activity takes or gives back (its input, its heartbeats, its result, the stored output)
nor in what the model reads."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.loops import workspace
from activities.loops.host import configure_host
from activities.loops.loop_activities import run_command
from activities.runtime import runtime
from activities.store import loops as loop_rows
from activities.tools.code_activities import run_code_tool
from config.settings import Settings
from tests.integration.loop_env import DEMO
from workflows.code_types import CodeSetup, CodeToolInput
from workflows.loop_types import CommandRequest, Limits, Outcome, RepoSource, Sandbox, Step, WorkspaceHandle
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput

SECRET = "sk-live-from-the-env-file-0123456789"
LIMITS = Limits(command_timeout_s=60, stall_timeout_s=30, memory_mb=1024)
CONTEXT = SurfaceContext(surface="slack", channel="C0ENV", user="U1", thread="1.0")
MEMORY = MemoryScopeRef("ws", "coder", "channel", "slack:C0ENV", "offline/hash", 30)
# Prints the value, beats at least once, and fails, so the error summary is read from its output.
COMMAND = 'echo "calling with $API_TOKEN in $REGION"; sleep 1.5; echo "rejected $API_TOKEN" >&2; exit 1'


async def _workspace(tmp_path: Path, owner: str) -> WorkspaceHandle:
    host = configure_host(tmp_path / "workspaces", name=f"env-{uuid.uuid4().hex[:6]}")
    path = host.repo(owner)
    base = await workspace.copy_local(DEMO, path)
    return WorkspaceHandle(
        loop_id=owner, task_queue=host.task_queue, worker=host.name, path=str(path), base_commit=base
    )


def _env_file(tmp_path: Path) -> str:
    path = tmp_path / "secrets" / "dev.env"
    path.parent.mkdir()
    path.write_text(f"API_TOKEN={SECRET}\nREGION=eu-west\n")
    return str(path)


async def test_a_loop_command_s_values_stay_out_of_its_input_beats_result_and_stored_output(
    db_settings: Settings, tmp_path: Path
) -> None:
    loop_id = f"loop-env-{uuid.uuid4().hex[:8]}"
    handle = await _workspace(tmp_path, loop_id)
    sandbox = Sandbox(env_file=_env_file(tmp_path))
    request = CommandRequest(
        loop_id=loop_id,
        workspace=handle,
        round=1,
        step=Step.VERIFY,
        command=COMMAND,
        limits=LIMITS,
        sandbox=sandbox,
    )
    beats: list[Any] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    result = await env.run(run_command, request)

    assert result.outcome is Outcome.FAILED
    assert "calling with *** in eu-west" in result.tail and "rejected ***" in result.tail
    assert SECRET not in request.model_dump_json()  # the workflow's input holds only the path
    assert SECRET not in result.model_dump_json()  # the tail, the error summary, the command
    assert beats and SECRET not in repr(beats)
    [stored] = await loop_rows.outputs(await runtime().pool(), loop_id)
    assert SECRET.encode() not in bytes(stored["output"]) and b"calling with *** in eu-west" in bytes(
        stored["output"]
    )


async def test_code_run_shows_the_model_the_output_masked(db_settings: Settings, tmp_path: Path) -> None:
    task_id = f"task-env-{uuid.uuid4().hex[:8]}"
    handle = await _workspace(tmp_path, task_id)
    setup = CodeSetup(
        repo=RepoSource(path=str(DEMO)), limits=LIMITS, sandbox=Sandbox(env_file=_env_file(tmp_path))
    )
    call = ToolCallInput.for_call(task_id, 1, "call-1", "code.run", {"command": COMMAND}, CONTEXT, MEMORY)
    beats: list[Any] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    done = await env.run(run_code_tool, CodeToolInput(call=call, workspace=handle, setup=setup))

    assert "calling with *** in eu-west" in done.result.output
    assert SECRET not in done.model_dump_json() and beats and SECRET not in repr(beats)
    stored = await loop_rows.outputs(await runtime().pool(), task_id)
    assert stored and all(SECRET.encode() not in bytes(row["output"]) for row in stored)
