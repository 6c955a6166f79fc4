"""The shipped team on the real dev server and real Postgres, with the offline model and the
real activities, as the embedded stack runs it: dev-platform asked to "summarise this and
check with security-reviewer" asks its teammate, whose task runs with security-reviewer's
own applied config; both sides are in the audit, and dev-platform's answer quotes the
teammate's."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from pathlib import Path

import psycopg
import pytest
from temporalio.client import Client

from activities.store.agents import apply_agent
from activities.store.db import get_pool
from activities.store.skills import apply_skill
from config.loader import example_agent
from config.settings import Settings
from config.skills import load_skill
from surfaces.tasks import start_task, task_id_for
from tests.helpers import eventually_async
from workers.worker import build_worker
from workflows import search
from workflows.types import SurfaceContext, TaskInput, TaskResult, TaskStatus

EXAMPLE_SKILLS = Path(__file__).resolve().parents[2] / "config" / "skills"
REQUEST = "Summarise this and check with security-reviewer whether the decision is safe."


def audit_rows(url: str, task_prefix: str) -> list[tuple[str, str, str, str, str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT task_id, agent, kind, actor, coalesce(tool, ''), outcome FROM audit_log"
            " WHERE task_id LIKE %s AND kind LIKE 'teammate_%%' ORDER BY id",
            (f"{task_prefix}%",),
        ).fetchall()
    return [tuple(row) for row in rows]  # type: ignore[misc]


async def started_with(client: Client, task_id: str) -> TaskInput:
    history = await client.get_workflow_handle(task_id).fetch_history()
    attrs = history.events[0].workflow_execution_started_event_attributes
    [decoded] = await client.data_converter.decode(attrs.input.payloads, [TaskInput])
    assert isinstance(decoded, TaskInput)
    return decoded


async def _both(listed: Awaitable[set[str]], wanted: set[str]) -> set[str] | None:
    found = await listed
    return found if found >= wanted else None


async def test_dev_platform_checks_with_security_reviewer_and_quotes_its_answer(
    client: Client, settings: Settings, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):  # the shipped policies fall back to offline
        monkeypatch.delenv(key, raising=False)
    settings = settings.model_copy(update={"task_queue": task_queue})
    pool = await get_pool(settings.require_database_url())
    for skill in ("thread-summary", "ci-triage"):
        await apply_skill(pool, load_skill(EXAMPLE_SKILLS / skill))
    caller, _ = await apply_agent(pool, example_agent("dev-platform"))
    await apply_agent(pool, example_agent("security-reviewer"))
    context = SurfaceContext(surface="cli", channel=f"ch-{uuid.uuid4().hex[:8]}", user="cli:local")
    task_id = task_id_for("cli", uuid.uuid4().hex)
    async with build_worker(client, settings):
        handle, started = await start_task(client, settings, caller, context, REQUEST, task_id=task_id)
        assert started
        result: TaskResult = await handle.result()
        [(child_id, *_), (parent_id, *_)] = audit_rows(settings.require_database_url(), task_id)
        teammate = await started_with(client, child_id)
        answer: TaskResult = await client.get_workflow_handle(child_id, result_type=TaskResult).result()

    assert result.status == TaskStatus.SUCCESS, result.reason
    assert parent_id == task_id and child_id.startswith(f"{task_id}-t")
    # The teammate ran as itself: its own agent, approvers, memory scope and budget.
    assert teammate.agent.name == "security-reviewer" and teammate.parent == task_id
    assert teammate.agent.spec.approvals.approvers == ["U04SECLEAD", "cli:security"]
    assert teammate.agent.spec.memory.scope.value == "agent"
    assert teammate.request.startswith("dev-platform asks: Summarise this and check with security-reviewer")
    assert answer.status == TaskStatus.SUCCESS and answer.reply.startswith("[offline model]")
    # Both sides audited: in the teammate's audit who asked, in the caller's whom and how it ended.
    assert audit_rows(settings.require_database_url(), task_id) == [
        (
            child_id,
            "security-reviewer",
            "teammate_asked",
            "agent:dev-platform",
            "agent.ask_teammate",
            "asked",
        ),
        (
            task_id,
            "dev-platform",
            "teammate_answered",
            "cli:local",
            "agent.ask_teammate",
            f"success: {child_id}",
        ),
    ]
    # The caller's answer quotes the teammate's.
    assert "security-reviewer (SUCCESS" in result.reply
    assert answer.reply.splitlines()[0] in result.reply
    # The teammate's task is found by the filters of the one that asked it: same channel and
    # surface, its own agent.
    attributes = (await client.get_workflow_handle(child_id).describe()).typed_search_attributes
    assert attributes.get(search.AGENT) == "security-reviewer"
    assert (attributes.get(search.SURFACE), attributes.get(search.CHANNEL)) == ("cli", context.channel)

    async def in_the_channel() -> set[str]:
        query = f"{search.CHANNEL.name} = '{context.channel}'"
        return {execution.id async for execution in client.list_workflows(query)}

    found = await eventually_async(
        lambda: _both(in_the_channel(), {task_id, child_id}), "both tasks in the channel's list"
    )
    assert found == {task_id, child_id}
