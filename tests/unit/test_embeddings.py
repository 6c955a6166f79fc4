"""The offline embedding (`offline/hashing-256`) and the recall ranking: pure logic.

Stored vectors must stay comparable with tomorrow's queries, so the embedding has to be the
same in every process; and it has to rank texts that share words above texts that do not.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from activities.store.embeddings import OFFLINE_DIMS, embed, features, hashing_embedding
from activities.store.memory_search import _ef_for, partition_of, rank
from config.agent import OFFLINE_EMBEDDING
from workflows.types import MemoryScopeRef


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_256_dims_and_unit_length() -> None:
    for text in ("We deploy on Fridays.", "", "!!!", "a " * 500):
        vector = hashing_embedding(text)
        assert len(vector) == OFFLINE_DIMS
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-9)


def test_same_text_same_vector_in_another_process() -> None:
    """Python's str hash changes per process; the embedding must not."""
    text = "Decision: we pick Postgres 16 for the usage ledger"
    code = (
        "import json; from activities.store.embeddings import hashing_embedding; "
        f"print(json.dumps(hashing_embedding({text!r})))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert json.loads(out) == hashing_embedding(text)


def test_features_are_unigrams_and_bigrams_lowercased() -> None:
    assert features("Deploy on FRIDAYS") == [
        "deploy",
        "on",
        "fridays",
        "deploy on",
        "on fridays",
    ]


def test_shared_words_rank_above_unrelated_text() -> None:
    query = hashing_embedding("when do we deploy to production?")
    related = hashing_embedding("We deploy to production every Tuesday morning.")
    unrelated = hashing_embedding("The lunch menu has soup and salad.")
    assert cosine(query, related) > cosine(query, unrelated) + 0.2


def test_word_order_matters_through_bigrams() -> None:
    a, b = hashing_embedding("dog bites man"), hashing_embedding("man bites dog")
    assert a != b  # same unigrams, different bigrams
    assert 0.3 < cosine(a, b) < 0.99


async def test_embed_offline_needs_no_key_and_reports_the_model() -> None:
    result = await embed(OFFLINE_EMBEDDING, ["one", "two words"])
    assert result.model == OFFLINE_EMBEDDING and result.dims == OFFLINE_DIMS
    assert result.vectors == [hashing_embedding("one"), hashing_embedding("two words")]
    assert result.cost_usd == 0.0
    with pytest.raises(ValueError):
        await embed(OFFLINE_EMBEDDING, [])


def test_partition_keys_keep_scopes_apart() -> None:
    def ref(scope: str, key: str, agent: str = "helper") -> MemoryScopeRef:
        return MemoryScopeRef("acme", agent, scope, key, OFFLINE_EMBEDDING, 30)

    assert partition_of(ref("channel", "slack:C1")) != partition_of(ref("channel", "slack:C2"))
    # Channel memory is per agent; workspace memory is shared by the workspace's agents.
    assert partition_of(ref("channel", "slack:C1")) != partition_of(ref("channel", "slack:C1", agent="other"))
    assert partition_of(ref("workspace", "acme")) == partition_of(ref("workspace", "acme", agent="other"))
    # A scope key with slashes cannot impersonate another agent's partition.
    assert partition_of(ref("channel", "x/helper/y")) != partition_of(ref("channel", "y", agent="x/helper"))
    with pytest.raises(ValueError):
        partition_of(ref("team", "x"))
    with pytest.raises(ValueError):
        partition_of(ref("channel", ""))


def test_recency_breaks_ties_and_similarity_dominates() -> None:
    now = datetime(2025, 6, 1, tzinfo=UTC)
    rows = [
        {"id": 1, "content": "old", "created_at": now - timedelta(days=90), "distance": 0.2},
        {"id": 2, "content": "new", "created_at": now - timedelta(hours=1), "distance": 0.2},
        {"id": 3, "content": "new but unrelated", "created_at": now, "distance": 0.9},
    ]
    ranked = rank(rows, 3, now)
    assert [item.content for item in ranked] == ["new", "old", "new but unrelated"]
    assert ranked[0].score > ranked[1].score > ranked[2].score
    assert len(rank(rows, 2, now)) == 2


def test_ef_search_grows_as_the_scope_share_shrinks() -> None:
    assert _ef_for(10, 1.0) == 40  # pgvector's default is the floor
    assert _ef_for(20, 1.0) == 60
    assert _ef_for(20, 0.4) == 150
    assert _ef_for(20, 0.1) == 600
    assert _ef_for(20, 0.01) == 1000  # pgvector's maximum is the ceiling
    assert _ef_for(20, 0.0) == 1000
