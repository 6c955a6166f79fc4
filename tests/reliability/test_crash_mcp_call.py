"""A worker SIGKILLed while an MCP tool is running: the call heartbeats, so the next worker
retries it once the heartbeat timeout passes (production's 20 s, not shortened here), well
before the call's 2-minute start-to-close timeout would have noticed the dead worker.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from temporalio.api.enums.v1 import PendingActivityState, TimeoutType
from temporalio.client import Client

from tests.fakes.mcp_servers import start_http
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.reliability.harness import (
    FAKE_OPENAI_KEY,
    Handle,
    WorkerForker,
    agent_config,
    start,
    stored,
    worker_env,
)
from workers.embedded import TemporalDevServer, free_port
from workflows.activity_options import MCP_CALL_OPTIONS
from workflows.types import ActivityName, TaskStatus

SECRET = "Bearer reliability-mcp"
TOOL_SECONDS = 6.0
NOTICED_WITHIN_SECONDS = 60.0  # the heartbeat timeout and a worker's start; 2 min without beats


async def _mcp_call_running(handle: Handle) -> bool:
    pending = (await handle.describe()).raw_description.pending_activities
    return any(
        p.activity_type.name == ActivityName.MCP_CALL_TOOL
        and p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        for p in pending
    )


async def test_worker_killed_during_an_mcp_call_is_retried_after_the_heartbeat_timeout(
    client: Client,
    dev_server: TemporalDevServer,
    pg_url: str,
    task_queue: str,
    tmp_path: Path,
    forker: WorkerForker,
) -> None:
    port = free_port()
    server, url = start_http(tmp_path, port, SECRET), f"http://127.0.0.1:{port}/mcp"
    fake = FakeModelAPI().start()
    fake.answer_tool_calls([tool_call("a", "web__slow", {"seconds": TOOL_SECONDS})])
    fake.answer("It took its time.")
    env = worker_env(
        dev_server.address,
        pg_url,
        task_queue,
        tmp_path,
        OPENLOOP_MODEL_API_BASE=fake.base_url,
        OPENAI_API_KEY=FAKE_OPENAI_KEY,
        TEST_MCP_AUTH=SECRET,
    )
    web = {
        "name": "web",
        "transport": "streamable-http",
        "url": url,
        "headers_from_env": {"Authorization": "TEST_MCP_AUTH"},
        "allow": ["slow"],
    }
    first = await forker.spawn("first", env, tmp_path)
    second = None
    try:
        await first.ready()
        agent = await stored(pg_url, agent_config(mcp_servers=[web]))
        handle = await start(client, task_queue, agent, "Run the slow tool")
        deadline = time.monotonic() + 60
        while not await _mcp_call_running(handle):
            assert time.monotonic() < deadline, "the MCP call never started"
            await asyncio.sleep(0.1)
        await first.kill()
        killed_at = time.monotonic()
        second = await forker.spawn("second", env, tmp_path)
        result = await asyncio.wait_for(handle.result(), NOTICED_WITHIN_SECONDS + TOOL_SECONDS)
        took = time.monotonic() - killed_at
    finally:
        for worker in (first, second):
            if worker is not None:
                await worker.kill()
        fake.stop()
        server.terminate()
        server.wait(10)

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert result.reply == "It took its time."
    heartbeat = MCP_CALL_OPTIONS["heartbeat_timeout"].total_seconds()
    assert heartbeat <= took < NOTICED_WITHIN_SECONDS + TOOL_SECONDS
    history = await handle.fetch_history()
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    started = [
        e.activity_task_started_event_attributes
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    [call] = [s for s in started if scheduled[s.scheduled_event_id] == ActivityName.MCP_CALL_TOOL]
    assert call.attempt == 2
    # The first attempt ended by its missed heartbeats, not by the start-to-close timeout.
    assert call.last_failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT
