"""Per-task ceilings against a provider that spends every output token it is allowed, with
the real model activity (LiteLLM, prices from its local cost map): `max_tokens` is clamped
whenever the headroom is smaller than a call's worst case, and neither the USD nor the token
ceiling is ever exceeded, call by call and in total.
(Clamping arithmetic: tests/workflow/test_ceilings.py, tests/unit/test_policy.py and
tests/integration/test_model_activity.py; monthly budgets, reservations that crash or
straddle a month: tests/workflow/test_agent_budget.py and test_crash_model_call.py.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from temporalio.client import Client

from activities.store.db import get_pool
from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI, Recorded, Scripted, tool_call
from tests.reliability.harness import FAKE_OPENAI_KEY, MODEL, agent_config, start, stored
from workers.worker import build_worker
from workflows.types import TaskStatus

MAX_OUTPUT = 256


class GreedyModel(FakeModelAPI):
    """Always wants another search, and always writes as much as `max_tokens` allows. Its
    prompt count is LiteLLM's count of the request it received."""

    def _next(self, model: str) -> Scripted:
        step = len(self.requests)
        search = tool_call(f"c{step}", "memory__search", {"query": f"q{step}"})
        return Scripted(content=None, tool_calls=[search])

    def _completion(self, entry: Scripted, recorded: Recorded) -> dict[str, Any]:
        body = super()._completion(entry, recorded)
        allowed = int(recorded.body.get("max_tokens") or 0)
        prompt = litellm.token_counter(
            model=MODEL, messages=recorded.body["messages"], tools=recorded.body.get("tools")
        )
        body["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": allowed,
            "total_tokens": prompt + allowed,
        }
        return body


@pytest.fixture
def greedy(monkeypatch: pytest.MonkeyPatch) -> Iterator[GreedyModel]:
    fake = GreedyModel()
    fake.start()
    monkeypatch.setenv("OPENLOOP_MODEL_API_BASE", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    yield fake
    fake.stop()


@pytest.mark.parametrize(
    ("budget", "limits", "ceiling"),
    [
        # Each ceiling leaves room for about one and a half calls (a prompt of ~160-210
        # tokens plus 256 out), so the second call must be clamped to what is left.
        ({"per_task_usd": 0.00029}, {"token_limit": 1_000_000}, "usd"),
        ({"per_task_usd": 5.0}, {"token_limit": 730}, "tokens"),
    ],
    ids=["usd", "tokens"],
)
async def test_a_greedy_model_never_spends_past_a_ceiling(
    client: Client,
    settings: Settings,
    task_queue: str,
    greedy: GreedyModel,
    budget: dict[str, float],
    limits: dict[str, int],
    ceiling: str,
) -> None:
    url = settings.require_database_url()
    agent = await stored(
        url,
        agent_config(
            model_policy={"default": MODEL, "max_output_tokens": MAX_OUTPUT},
            tools=[{"name": "memory.search", "permissions": ["memory:read"]}],
            budget=budget,
            limits={"max_iterations": 50, **limits},
            approvals={"ttl": "1s"},  # nobody extends the budget: the pause ends at once
        ),
    )
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Search until you are stopped")
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == TaskStatus.BUDGET_EXHAUSTED, result.reason
    sent = [int(r.body.get("max_tokens") or 0) for r in greedy.requests]
    assert len(sent) >= 2 and max(sent) <= MAX_OUTPUT
    assert min(sent) < MAX_OUTPUT, sent  # the last calls were clamped to what was left
    pool = await get_pool(url)
    async with pool.connection() as conn:
        rows: list[Any] = await (
            await conn.execute(
                "SELECT prompt_tokens, completion_tokens, cost_usd FROM usage_ledger WHERE task_id = %s",
                (handle.id,),
            )
        ).fetchall()
    assert len(rows) == len(sent)
    spent = sum(row["cost_usd"] for row in rows)
    tokens = sum(row["prompt_tokens"] + row["completion_tokens"] for row in rows)
    assert spent == pytest.approx(result.usage.cost_usd) and tokens == result.usage.tokens
    assert spent <= budget["per_task_usd"] + 1e-12, (spent, ceiling)
    assert tokens <= limits["token_limit"], (tokens, ceiling)
    assert ceiling in result.reason or (ceiling == "usd" and "budget" in result.reason), result.reason
