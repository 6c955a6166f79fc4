"""Memory scopes are partitions the database enforces, whatever the query asks: a search for
channel B, with any text (channel A's own words included), on the exact path or the HNSW
path, never returns a row of channel A, nor of the same channel id in another workspace or
for another agent, and hostile channel ids change nothing.
(The reader role and row-level security themselves:
tests/integration/test_memory.py::test_the_database_hides_other_partitions_from_the_reader_role.)
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activities.store.db import get_pool
from activities.store.memory import remember, search
from config.agent import OFFLINE_EMBEDDING
from workflows.types import MemoryScopeRef

A_TEXTS = [
    "Channel A secret: the launch date is March 3.",
    "Channel A decided to drop the billing v1 API.",
    "Deploy freeze in channel A until the audit ends.",
]
HOSTILE_KEY = "slack:CB' OR '1'='1; SET ROLE postgres; --"


def scope(workspace: str, key: str, agent: str = "helper") -> MemoryScopeRef:
    return MemoryScopeRef(workspace, agent, "channel", key, OFFLINE_EMBEDDING, 30)


@pytest.fixture(scope="module")
async def scopes(pg_url: str) -> dict[str, MemoryScopeRef]:
    pool = await get_pool(pg_url)
    ws = f"iso-{uuid.uuid4().hex[:8]}"
    named = {
        "a": scope(ws, "slack:CA"),
        "b": scope(ws, "slack:CB"),
        "b_other_workspace": scope(ws + "-x", "slack:CB"),
        "b_other_agent": scope(ws, "slack:CB", agent="other"),
        "hostile": scope(ws, HOSTILE_KEY),
    }
    for name, ref in named.items():
        texts = A_TEXTS if name == "a" else [f"{name}: notes about the launch and deploys"]
        for n, text in enumerate(texts):
            await remember(pool, ref, text, f"task-{name}", n, f"{ws}:{name}:{n}")
    return named


@settings(
    max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.one_of(st.sampled_from(A_TEXTS), st.text(min_size=1, max_size=60)), hnsw=st.booleans())
async def test_a_search_for_channel_b_never_returns_channel_a(
    pg_url: str, scopes: dict[str, MemoryScopeRef], query: str, hnsw: bool
) -> None:
    pool = await get_pool(pg_url)
    options = {"exact_max_rows": 0} if hnsw else {}
    for name in ("b", "b_other_workspace", "b_other_agent", "hostile"):
        found = await search(pool, scopes[name], query or "x", 10, **options)
        assert [item.content for item in found] == [f"{name}: notes about the launch and deploys"]
