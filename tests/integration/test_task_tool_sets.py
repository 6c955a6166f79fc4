"""The MCP tool specs a task started with: stored once per distinct set and pointed to by each
task, so a model call offers exactly the schemas the task listed (real PostgreSQL)."""

from __future__ import annotations

import uuid

import pytest
from psycopg_pool import AsyncConnectionPool

from activities.store import task_tools
from activities.store.db import get_pool
from config.settings import Settings
from workflows.tool_catalog import ToolRuns, ToolSpec

pytestmark = pytest.mark.needs_server


@pytest.fixture
async def pool(db_settings: Settings) -> AsyncConnectionPool:
    return await get_pool(db_settings.require_database_url())


def spec(name: str, description: str = "Reads a note.") -> ToolSpec:
    return ToolSpec(
        name=f"notes.{name}",
        description=description,
        parameters={"type": "object", "properties": {"name": {"type": "string"}}},
        permission="mcp:notes",
        writes=name.startswith("create"),
        runs=ToolRuns.MCP,
        source="mcp:notes",
    )


def task() -> str:
    return f"task-{uuid.uuid4().hex[:10]}"


async def rows(pool: AsyncConnectionPool, sql: str, *args: object) -> int:
    async with pool.connection() as conn:
        found = await (await conn.execute(sql, args)).fetchone()
    return int(next(iter(found.values()))) if found else 0  # the pool's rows are dicts


async def test_tasks_listing_the_same_tools_share_one_stored_set(pool: AsyncConnectionPool) -> None:
    listed = [spec("read_note"), spec("create_note")]
    first, second = task(), task()
    await task_tools.save_specs(pool, first, listed)
    await task_tools.save_specs(pool, second, [spec("read_note"), spec("create_note")])  # listed again

    for each in (first, second):
        loaded = await task_tools.load_specs(
            pool, each, ["notes.read_note", "notes.create_note", "notes.gone"]
        )
        assert loaded == {s.name: s for s in listed}
    shas = "SELECT count(DISTINCT sha256) FROM task_tool_sets WHERE task_id = ANY(%s)"
    assert await rows(pool, shas, [first, second]) == 1


async def test_a_changed_listing_is_a_set_of_its_own_and_each_task_keeps_what_it_saw(
    pool: AsyncConnectionPool,
) -> None:
    before, after = task(), task()
    await task_tools.save_specs(pool, before, [spec("read_note")])
    await task_tools.save_specs(pool, after, [spec("read_note", "Reads a note, now with tags.")])

    assert (await task_tools.load_specs(pool, before, ["notes.read_note"]))[
        "notes.read_note"
    ].description == ("Reads a note.")
    assert (await task_tools.load_specs(pool, after, ["notes.read_note"]))["notes.read_note"].description == (
        "Reads a note, now with tags."
    )


async def test_a_task_listed_before_sets_were_shared_still_loads(pool: AsyncConnectionPool) -> None:
    old = task()
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO task_tools (task_id, name, spec) VALUES (%s, %s, %s::jsonb)",
            (
                old,
                "notes.read_note",
                '{"name": "notes.read_note", "description": "Reads a note.",'
                ' "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},'
                ' "permission": "mcp:notes", "writes": false, "runs": "mcp", "source": "mcp:notes"}',
            ),
        )
    assert await task_tools.load_specs(pool, old, ["notes.read_note"]) == {
        "notes.read_note": spec("read_note")
    }


async def test_a_set_this_worker_remembers_but_the_database_lost_is_stored_again(
    pool: AsyncConnectionPool,
) -> None:
    listed = [spec("read_note"), spec("summarise_note")]
    await task_tools.save_specs(pool, task(), listed)
    async with pool.connection() as conn:  # the database restored from before that set
        await conn.execute(
            "DELETE FROM task_tool_sets WHERE sha256 IN (SELECT sha256 FROM tool_spec_sets"
            " WHERE specs ? 'notes.summarise_note')"
        )
        await conn.execute("DELETE FROM tool_spec_sets WHERE specs ? 'notes.summarise_note'")
    later = task()
    await task_tools.save_specs(pool, later, listed)
    assert set(await task_tools.load_specs(pool, later, ["notes.read_note", "notes.summarise_note"])) == {
        "notes.read_note",
        "notes.summarise_note",
    }
