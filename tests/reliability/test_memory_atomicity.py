"""A memory write and what records it: the memory row, its audit row, and (for a paid
embedding) its usage row. A crash between them must leave all or none, and the retry of
the tool activity must complete what is missing, once. The crash is injected in the
database: the write after the memory row fails, as if the worker had died right before it.
(A memory write retried after it committed stores one row:
tests/integration/test_memory_tools.py::test_save_then_search_through_the_tool_activity.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from temporalio.testing import ActivityEnvironment

from activities.providers import API_BASE_ENV
from activities.tools.tool_activities import run_tool
from config.agent import OFFLINE_EMBEDDING
from config.settings import Settings
from tests.fakes.embeddings_api import FakeEmbeddingsAPI
from tests.reliability.harness import install_faults, scalar, set_fault
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput

MEMORIES = "SELECT count(*) FROM memories WHERE source_task_id = %s"
AUDITS = "SELECT count(*) FROM audit_log WHERE task_id = %s AND kind = 'tool_call'"
EMBEDDING_USAGE = "SELECT count(*) FROM usage_ledger WHERE task_id = %s AND task_kind = 'embedding'"


def save(embedding: str) -> ToolCallInput:
    task_id = f"task-rel-mem-{uuid.uuid4().hex[:10]}"
    scope = MemoryScopeRef(f"ws-{uuid.uuid4().hex[:8]}", "helper", "channel", "slack:CMEM", embedding, 30)
    return ToolCallInput(
        task_id=task_id,
        step=3,
        call_id="call-1",
        tool="memory.save",
        arguments={"content": "We deploy on Tuesdays."},
        idempotency_key=f"{task_id}:3:call-1",
        context=SurfaceContext(surface="slack", channel="CMEM", user="U1"),
        memory=scope,
        requested_by="U1",
    )


@pytest.fixture
def faults(db_settings: Settings) -> str:
    url = db_settings.require_database_url()
    install_faults(url)
    return url


@pytest.fixture
def paid_embeddings(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEmbeddingsAPI]:
    server = FakeEmbeddingsAPI(dims=8).start()
    monkeypatch.setenv(API_BASE_ENV, server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-embeddings")
    yield server
    server.stop()


async def test_a_crash_between_the_memory_row_and_its_audit_row_leaves_both_or_neither(
    faults: str,
) -> None:
    inp = save(OFFLINE_EMBEDDING)
    await set_fault(faults, inp.task_id, "audit_log", "fail")
    try:
        with pytest.raises(Exception, match="injected fault"):
            await ActivityEnvironment().run(run_tool, inp)
        after_crash = (await scalar(faults, MEMORIES, inp.task_id), await scalar(faults, AUDITS, inp.task_id))
        assert after_crash in ((0, 0), (1, 1)), f"memory and audit rows after the crash: {after_crash}"
    finally:
        await set_fault(faults, inp.task_id, "audit_log", None)
    result = await ActivityEnvironment().run(run_tool, inp)  # Temporal's retry
    assert result.ok
    assert (await scalar(faults, MEMORIES, inp.task_id), await scalar(faults, AUDITS, inp.task_id)) == (1, 1)


async def test_a_crash_after_a_paid_memory_write_still_charges_its_embedding_once(
    faults: str, paid_embeddings: FakeEmbeddingsAPI
) -> None:
    inp = save("openai/text-embedding-3-small")
    await set_fault(faults, inp.task_id, "usage_ledger", "fail")
    try:
        with pytest.raises(Exception, match="injected fault"):
            await ActivityEnvironment().run(run_tool, inp)
    finally:
        await set_fault(faults, inp.task_id, "usage_ledger", None)
    for _ in range(2):  # Temporal's retry, and one more
        assert (await ActivityEnvironment().run(run_tool, inp)).ok
    assert await scalar(faults, MEMORIES, inp.task_id) == 1
    assert await scalar(faults, EMBEDDING_USAGE, inp.task_id) == 1  # paid for, so charged
