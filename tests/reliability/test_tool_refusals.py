"""Model output that must never run: arguments that are not JSON or break the tool's
schema, a tool that does not exist, a tool the agent was not given. Each is refused, told
to the model, audited, and never executed, with the real activities and LiteLLM talking to
a fake provider. (The same with stand-in activities: tests/workflow/test_ceilings.py.)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from temporalio.client import Client

from activities.store.db import get_pool
from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.reliability.harness import agent_config, scalar, start, stored
from workers.worker import build_worker
from workflows.types import TaskStatus
from workflows.untrusted import unwrap

CALLS = [
    tool_call("call_json", "memory__search", "{not json"),
    tool_call("call_schema", "memory__search", {"query": 7}),
    tool_call("call_unknown", "shell__exec", {"cmd": "cat /etc/passwd"}),
    tool_call("call_not_given", "github__create_issue", {"repo": "acme/api", "title": "x"}),
]
PROBLEMS = {
    "call_json": "not valid JSON",
    "call_schema": "is not of type 'string'",
    "call_unknown": "unknown tool 'shell.exec'",
    # A task knows only the tools it was given: a native tool not granted is unknown to it.
    "call_not_given": "unknown tool 'github.create_issue'; tools you have: memory.search",
}


async def test_bad_tool_calls_are_refused_told_to_the_model_audited_and_never_run(
    client: Client, settings: Settings, task_queue: str, model: FakeModelAPI
) -> None:
    url = settings.require_database_url()
    agent = await stored(url, agent_config(tools=[{"name": "memory.search", "permissions": ["memory:read"]}]))
    model.answer_tool_calls(CALLS)
    model.answer("I cannot do any of that.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Search, then read /etc/passwd and file an issue")
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == TaskStatus.SUCCESS and result.reply == "I cannot do any of that."
    # Told to the model, one tool message per call, each naming what was wrong.
    sent = model.requests[1].body["messages"]
    # Every tool message reaches the model as an untrusted-data block naming the tool.
    assert all(m["content"].startswith('<untrusted-data source="tool:') for m in sent if m["role"] == "tool")
    told = {m["tool_call_id"]: unwrap(m["content"]) for m in sent if m["role"] == "tool"}
    assert set(told) == set(PROBLEMS)
    for call_id, problem in PROBLEMS.items():
        assert problem in told[call_id] and told[call_id].startswith("Error"), told[call_id]
    # Never executed: no tool activity ran.
    history = await handle.fetch_history()
    assert "openloop.tool.run" not in history.to_json()
    assert (
        await scalar(
            url, "SELECT count(*) FROM audit_log WHERE task_id = %s AND kind = 'tool_call'", handle.id
        )
        == 0
    )
    # Audited, every one of them, with the reason.
    pool = await get_pool(url)
    async with pool.connection() as conn:
        rows: list[Any] = await (
            await conn.execute(
                "SELECT tool, outcome FROM audit_log WHERE task_id = %s AND kind = 'tool_refused'"
                " ORDER BY id",
                (handle.id,),
            )
        ).fetchall()
    refused = {(row["tool"], row["outcome"]) for row in rows}
    assert len(rows) == len(CALLS), json.dumps(rows, default=str)
    assert {tool for tool, _ in refused} == {"memory.search", "shell.exec", "github.create_issue"}
    assert all(any(p in outcome for p in PROBLEMS.values()) for _, outcome in refused)
