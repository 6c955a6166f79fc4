"""Memory from the outside: the `memory.save`/`memory.search` tools through the tool activity,
a LiteLLM embedding model over the wire (OpenAI's embeddings API, served locally), and the
`openloop memory list|search|forget` commands.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest
from psycopg_pool import AsyncConnectionPool
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from typer.testing import CliRunner

from activities.providers import API_BASE_ENV
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from activities.store.embeddings import embed
from activities.store.memory import list_memories, remember, search
from activities.store.memory_search import hnsw_index_name
from activities.store.store_activities import recall
from activities.tools.tool_activities import run_tool
from config.agent import OFFLINE_EMBEDDING, AgentConfig
from config.settings import Settings
from surfaces.cli.main import app
from tests.fakes.embeddings_api import FakeEmbeddingsAPI
from workflows.types import MemoryScopeRef, RecallInput, SurfaceContext, ToolCallInput

MODEL = "openai/text-embedding-3-small"


@pytest.fixture
async def pool(db_settings: Settings) -> AsyncConnectionPool:
    return await get_pool(db_settings.require_database_url())


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEmbeddingsAPI]:
    server = FakeEmbeddingsAPI(dims=8).start()
    monkeypatch.setenv(API_BASE_ENV, server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-embeddings")
    yield server
    server.stop()


def tool_input(tool: str, args: dict[str, object], memory: MemoryScopeRef, key: str) -> ToolCallInput:
    context = SurfaceContext(surface="slack", channel=memory.scope_key.split(":")[-1], user="U1")
    return ToolCallInput(
        task_id=f"task-{key}",
        step=2,
        call_id="call-1",
        tool=tool,
        arguments=args,
        idempotency_key=key,
        context=context,
        memory=memory,
        requested_by="U1",
    )


async def test_save_then_search_through_the_tool_activity(pool: AsyncConnectionPool) -> None:
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    here = MemoryScopeRef(ws, "helper", "channel", "slack:CHERE", OFFLINE_EMBEDDING, 30)
    there = MemoryScopeRef(ws, "helper", "channel", "slack:CTHERE", OFFLINE_EMBEDDING, 30)
    env = ActivityEnvironment()
    content = "We chose Postgres 16 for the usage ledger."
    save = tool_input("memory.save", {"content": content}, here, f"{ws}-s1")
    first = await env.run(run_tool, save)
    retried = await env.run(run_tool, save)  # a retry of the same workflow step
    assert first.ok and first.output == f"Saved to channel memory: {content}"
    assert retried.output == first.output
    assert [m.content for m in await list_memories(pool, workspace=ws)] == [content]

    await env.run(run_tool, tool_input("memory.save", {"content": "Other room: MySQL."}, there, f"{ws}-s2"))
    found = await env.run(
        run_tool, tool_input("memory.search", {"query": "which database?"}, here, f"{ws}-q1")
    )
    assert found.ok and "Postgres 16" in found.output and "MySQL" not in found.output
    empty = await env.run(run_tool, tool_input("memory.save", {"content": "  "}, here, f"{ws}-s3"))
    assert not empty.ok and empty.error_kind == "invalid"


async def test_a_litellm_model_over_the_wire_and_models_never_mix(
    pool: AsyncConnectionPool, api: FakeEmbeddingsAPI
) -> None:
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    paid = MemoryScopeRef(ws, "helper", "channel", "slack:CMIX", MODEL, 30)
    offline = MemoryScopeRef(ws, "helper", "channel", "slack:CMIX", OFFLINE_EMBEDDING, 30)
    await remember(pool, paid, "Deploys happen on Tuesday.", "t", 1, f"{ws}:paid")
    await remember(pool, offline, "Deploys happen on Friday.", "t", 2, f"{ws}:free")
    sent = api.requests[-1]
    assert sent["path"] == "/v1/embeddings" and sent["body"]["model"] == "text-embedding-3-small"
    assert sent["authorization"] == "Bearer sk-test-embeddings"

    # Each model's search sees only its own vectors, whatever the scope holds.
    assert [i.content for i in await search(pool, paid, "when do deploys happen", 5)] == [
        "Deploys happen on Tuesday."
    ]
    assert [i.content for i in await search(pool, offline, "when do deploys happen", 5)] == [
        "Deploys happen on Friday."
    ]
    async with pool.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT embedding_dims FROM memories WHERE idempotency_key = %s", (f"{ws}:paid",)
            )
        ).fetchone()
        assert row == {"embedding_dims": 8}
        index = await (
            await conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (hnsw_index_name(MODEL),)
            )
        ).fetchone()
    assert index is not None and "vector(8)" in index["indexdef"] and MODEL in index["indexdef"]

    # A paid recall is a model call: one usage row, however often the activity is retried.
    env = ActivityEnvironment()
    task_id = f"task-{ws}"
    for _ in range(2):
        result = await env.run(recall, RecallInput(paid, "deploy day", 3, task_id))
        assert [i.content for i in result.items] == ["Deploys happen on Tuesday."]
    async with pool.connection() as conn:
        usage = await (
            await conn.execute(
                "SELECT model, prompt_tokens, channel, task_kind, cost_usd FROM usage_ledger"
                " WHERE task_id = %s",
                (task_id,),
            )
        ).fetchall()
    assert len(usage) == 1
    assert usage[0]["model"] == MODEL and usage[0]["prompt_tokens"] == 2
    assert usage[0]["channel"] == "slack:CMIX" and usage[0]["task_kind"] == "embedding"
    assert usage[0]["cost_usd"] >= 0


async def test_provider_errors_are_classified(api: FakeEmbeddingsAPI) -> None:
    api.errors.append((401, {}))
    with pytest.raises(ApplicationError) as bad_key:
        await embed(MODEL, ["x"])
    assert bad_key.value.non_retryable and "OPENAI_API_KEY" in str(bad_key.value)
    assert "sk-test-embeddings" not in str(bad_key.value)
    api.errors.append((429, {"retry-after": "2"}))
    sent = len(api.requests)
    with pytest.raises(ApplicationError) as limited:
        await embed(MODEL, ["x"])
    # Retryable, and retried by Temporal only: the client library sent exactly one request.
    assert not limited.value.non_retryable
    assert len(api.requests) == sent + 1


# The CLI -------------------------------------------------------------------------------


@pytest.fixture
async def stored_agent(pool: AsyncConnectionPool) -> tuple[str, str, list[str]]:
    name = f"mem-{uuid.uuid4().hex[:8]}"
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name, "workspace": "default"},
            "spec": {"memory": {"scope": "channel", "retention_days": 30}},
        }
    )
    await apply_agent(pool, config)
    key = f"cli:room-{name}"
    scope = MemoryScopeRef("default", name, "channel", key, OFFLINE_EMBEDDING, 30)
    ids = [
        (await remember(pool, scope, text, "t", n, f"{name}:{n}"))[0]
        for n, text in enumerate(["Deploy freeze starts Friday.", "Standup moved to 10:00."])
    ]
    return name, key, ids


def test_memory_commands(
    stored_agent: tuple[str, str, list[str]], pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENLOOP_DATABASE_URL", pg_url)
    name, key, ids = stored_agent
    runner = CliRunner()

    listed = runner.invoke(app, ["memory", "list", "--agent", name, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.output.splitlines()]
    assert {r["content"] for r in rows} == {"Deploy freeze starts Friday.", "Standup moved to 10:00."}

    found = runner.invoke(app, ["memory", "search", "deploy freeze", "--agent", name, "--key", key, "--json"])
    assert found.exit_code == 0, found.output
    assert json.loads(found.output)["items"][0]["content"] == "Deploy freeze starts Friday."
    no_key = runner.invoke(app, ["memory", "search", "x", "--agent", name])
    assert no_key.exit_code == 1 and "--key" in no_key.output
    unknown = runner.invoke(app, ["memory", "search", "x", "--agent", "nobody-here", "--key", key])
    assert unknown.exit_code == 1

    gone = runner.invoke(app, ["memory", "forget", ids[0], "--yes", "--by", "bob"])
    assert gone.exit_code == 0 and "Forgot memory" in gone.output and "bob" in gone.output
    again = runner.invoke(app, ["memory", "forget", ids[0], "--yes"])
    assert again.exit_code == 1
    left = runner.invoke(app, ["memory", "list", "--agent", name, "--json"])
    assert [json.loads(line)["id"] for line in left.output.splitlines()] == [ids[1]]

    async def audited() -> list[tuple[str, str]]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            cursor = await conn.execute(
                "SELECT actor, kind FROM audit_log WHERE key = %s", (f"memory.forget:{ids[0]}",)
            )
            return [tuple(row) for row in await cursor.fetchall()]

    assert asyncio.run(audited()) == [("bob", "memory_forgotten")]
