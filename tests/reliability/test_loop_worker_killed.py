"""The loop worker holding a workspace is killed mid-verify: the loop rebuilds the workspace on
another worker from the last finished round's stored diff and finishes there.

The first loop worker is a real production process (`openloop worker --loops`), killed with
SIGKILL while round 2's verify runs; nothing of it is told. Only the heartbeat timeout is
shorter than in production, so the loss is noticed in seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tests.integration.loop_env import PYTEST, TOKEN, loop_world, project_with
from workers.embedded import TemporalDevServer
from workers.loops import build_loop_workers
from workflows.loop_types import LOOP_WORKFLOW_NAME, LoopInput, LoopResult, LoopStatus, Step, WorkerTimeouts


def _start_loop_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "surfaces.cli.main", "worker", "--loops"],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


async def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while text not in (printed := await asyncio.to_thread(log.read_text, errors="replace")):
        assert proc.poll() is None, printed
        assert time.monotonic() < deadline, f"no {text!r} in {printed}"
        await asyncio.sleep(0.2)


async def _running_step(client: Client, loop_id: str) -> dict[str, Any] | None:
    description = await client.get_workflow_handle(loop_id).describe()
    for pending in description.raw_description.pending_activities:
        if pending.heartbeat_details.payloads:
            [details] = await client.data_converter.decode(pending.heartbeat_details.payloads)
            return details  # type: ignore[no-any-return]
    return None


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "deploy-sigterm"])
async def test_a_loop_goes_on_elsewhere_when_its_worker_is_stopped_mid_verify(
    client: Client, dev_server: TemporalDevServer, pg_url: str, tmp_path: Path, stop: signal.Signals
) -> None:
    """SIGKILL: nothing of the worker is told. SIGTERM (a deploy, Ctrl-C): the worker stops
    gracefully, its running command is cancelled, and that is a lost workspace, not an error."""
    project = project_with(tmp_path)
    async with loop_world(client, pg_url, tmp_path, project, loop_worker=False) as world:
        settings = world.settings
        env = {
            **os.environ,
            "OPENLOOP_TEMPORAL_ADDRESS": dev_server.address,
            "OPENLOOP_DATABASE_URL": pg_url,
            "OPENLOOP_LOOP_TASK_QUEUE": settings.loop_task_queue,
            "OPENLOOP_WORKSPACES_DIR": str(tmp_path / "killed-worker"),
            "GITHUB_TOKEN": TOKEN,
            "GITHUB_GIT_URL": world.git.url,
        }
        log = tmp_path / "loop-worker.log"
        doomed = _start_loop_worker(env, log)
        try:
            await _wait_for(log, "worker ready", doomed)
            slow_verify = f"if [ {{round}} = 2 ]; then sleep 5; fi; {PYTEST}"
            spec = world.spec(
                {
                    Step.PLAY: "echo round {round} >> rounds.txt",
                    Step.FIX: "python autofix.py {last_error}",
                    Step.VERIFY: slow_verify,
                }
            )
            loop_id = f"loop-stopped-worker-{stop.name.lower()}"
            handle = await client.start_workflow(
                LOOP_WORKFLOW_NAME,
                LoopInput(
                    loop_id=loop_id,
                    spec=spec,
                    loop_queue=settings.loop_task_queue,
                    timeouts=WorkerTimeouts(heartbeat_s=3, pickup_s=10),
                ),
                id=loop_id,
                task_queue=settings.task_queue,
                result_type=LoopResult,
            )
            deadline = time.monotonic() + 60
            while True:
                running = await _running_step(client, loop_id)
                if running and running.get("step") == "verify" and running.get("round") == 2:
                    break
                assert time.monotonic() < deadline, "round 2's verify never started"
                await asyncio.sleep(0.2)
            if stop is signal.SIGKILL:
                os.killpg(doomed.pid, signal.SIGKILL)
            else:
                doomed.send_signal(stop)
                await asyncio.to_thread(doomed.wait, 60)
        finally:
            if doomed.poll() is None:
                os.killpg(doomed.pid, signal.SIGKILL)
            doomed.wait()

        host, survivors = build_loop_workers(client, settings, name="survivor")
        async with survivors[0], survivors[1]:
            result = await handle.result()
        reports = await world.reports(loop_id)
        patch = await world.diff(result)

    assert result.status is LoopStatus.SUCCESS, result.reason
    assert [r.round for r in reports] == [1, 2]
    assert reports[0].worker != host.name and reports[1].worker == host.name
    # Rebuilt from round 1's diff: the killed worker's half-done round 2 left no trace.
    assert "+round 1\n+round 2\n" in patch and patch.count("+round 2") == 1
    assert "+    return sum(values) / len(values)" in patch
