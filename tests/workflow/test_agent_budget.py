"""The per-agent budget workflow on the time-skipping server: concurrent reservations against
monthly caps, refusals that name the cap, warn mode, keys that apply once, month rollover,
holds past their TTL, and continue-as-new; and the activity-side client on the dev server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.llm.budget_client import (
    affordable_max_tokens,
    release_budget,
    reserve_budget,
    settle_budget,
    worst_case_usd,
)
from workers.sandbox import workflow_runner
from workflows.agent_budget import AgentBudgetWorkflow
from workflows.budget_types import (
    BudgetInput,
    BudgetSnapshot,
    ReleaseRequest,
    ReserveRequest,
    ReserveResult,
    SettleRequest,
    budget_workflow_id,
    period_of,
)

Handle = WorkflowHandle[AgentBudgetWorkflow, None]
CAP = 0.50
CALL = 0.10  # worst case of one call: the cap fits five


@asynccontextmanager
async def budget(client: Client, task_queue: str, **options: Any) -> AsyncIterator[Handle]:
    """A worker and a fresh budget workflow; terminated afterwards so no timer outlives the test."""
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=task_queue, workflows=[AgentBudgetWorkflow], workflow_runner=workflow_runner()
    ):
        handle = await client.start_workflow(
            AgentBudgetWorkflow.run,
            BudgetInput("ws", agent, **options),
            id=budget_workflow_id("ws", agent),
            task_queue=task_queue,
        )
        try:
            yield handle
        finally:
            await handle.terminate()


def ask(
    key: str,
    amount: float = CALL,
    minimum: float = CALL,
    channel: str = "slack:C1",
    monthly: float | None = CAP,
    channel_monthly: float | None = None,
    mode: str = "block",
) -> ReserveRequest:
    return ReserveRequest(key, channel, amount, minimum, monthly, channel_monthly, mode)


async def reserve(handle: Handle, request: ReserveRequest) -> ReserveResult:
    return await handle.execute_update(AgentBudgetWorkflow.reserve, request)


async def settle(handle: Handle, key: str, cost: float) -> None:
    await handle.execute_update(AgentBudgetWorkflow.settle, SettleRequest(key, cost))


async def release(handle: Handle, key: str) -> None:
    await handle.execute_update(AgentBudgetWorkflow.release, ReleaseRequest(key))


async def snap(handle: Handle) -> BudgetSnapshot:
    return await handle.query(AgentBudgetWorkflow.snapshot)


async def test_twenty_concurrent_reservations_fit_the_cap_and_the_rest_are_refused(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    snapshots: list[BudgetSnapshot] = []
    async with budget(ts_env.client, task_queue) as handle:
        grants = await asyncio.gather(*(reserve(handle, ask(f"first-{n}")) for n in range(20)))
        held = await snap(handle)
        settling = [settle(handle, g.key, 0.07) for g in grants if g.granted]
        watching = [snap(handle) for _ in range(10)]
        results = await asyncio.gather(*settling, *watching)
        snapshots = [r for r in results if isinstance(r, BudgetSnapshot)]
        settled = await snap(handle)
    assert sum(g.granted for g in grants) == 5
    assert held.reserved_usd == pytest.approx(CAP) and held.active_holds == 5
    assert all(s.spent_usd + s.reserved_usd <= CAP + 1e-9 for s in snapshots)
    assert settled.spent_usd == pytest.approx(0.35) and settled.reserved_usd == 0
    refused = [g for g in grants if not g.granted]
    assert len(refused) == 15 and all(g.amount_usd == 0 for g in refused)
    reason = refused[0].reason
    assert "the agent's monthly budget of $0.50" in reason
    assert "$0.00 left" in reason and "$0.50 held by calls in flight" in reason
    assert "needs at least $0.10" in reason


async def test_twenty_tasks_started_together_never_spend_past_the_cap(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    held_now = most_held = 0
    snapshots: list[BudgetSnapshot] = []
    refusals: list[ReserveResult] = []

    async def task(handle: Handle, n: int) -> int:
        """Model calls until the budget refuses one: reserve the worst case, call, settle."""
        nonlocal held_now, most_held
        calls = 0
        while True:
            grant = await reserve(handle, ask(f"task-{n}:{calls}"))
            if not grant.granted:
                refusals.append(grant)  # the task stops with BUDGET_EXHAUSTED
                return calls
            held_now += 1
            most_held = max(most_held, held_now)
            await asyncio.sleep(0.01)  # the model call
            await settle(handle, grant.key, 0.07)  # cheaper than the worst case
            held_now -= 1
            calls += 1

    async def watch(handle: Handle, done: asyncio.Event) -> None:
        while not done.is_set():
            snapshots.append(await snap(handle))

    async with budget(ts_env.client, task_queue) as handle:
        done = asyncio.Event()
        watcher = asyncio.create_task(watch(handle, done))
        calls = await asyncio.gather(*(task(handle, n) for n in range(20)))
        done.set()
        await watcher
        final = await snap(handle)
    assert most_held <= 5 and len(refusals) == 20  # every task ran until the budget stopped it
    assert snapshots and all(s.spent_usd + s.reserved_usd <= CAP + 1e-9 for s in snapshots)
    assert final.spent_usd == pytest.approx(0.07 * sum(calls)) and final.spent_usd <= CAP
    assert sum(calls) >= 5 and final.reserved_usd == 0 and final.active_holds == 0
    assert all("the agent's monthly budget of $0.50" in r.reason for r in refusals)


async def test_grant_shrinks_to_the_headroom_and_channel_caps_are_separate(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with budget(ts_env.client, task_queue) as handle:
        monthly, per_channel = 10.0, 0.15
        first = await reserve(handle, ask("a1", monthly=monthly, channel_monthly=per_channel))
        partial = await reserve(handle, ask("a2", minimum=0.02, monthly=monthly, channel_monthly=per_channel))
        refused = await reserve(handle, ask("a3", minimum=0.02, monthly=monthly, channel_monthly=per_channel))
        other = await reserve(
            handle, ask("b1", channel="slack:C2", monthly=monthly, channel_monthly=per_channel)
        )
        view = await snap(handle)
    assert first.granted and first.amount_usd == pytest.approx(0.10)
    assert partial.granted and partial.amount_usd == pytest.approx(0.05)  # clamped to what is left
    assert not refused.granted
    assert "the monthly budget of channel slack:C1 of $0.15" in refused.reason
    assert "agent's monthly budget" not in refused.reason  # $10 is not what stopped it
    assert other.granted and other.amount_usd == pytest.approx(0.10)
    assert view.channels["slack:C1"].reserved_usd == pytest.approx(0.15)
    assert view.channels["slack:C2"].reserved_usd == pytest.approx(0.10)


async def test_warn_mode_lets_calls_through_and_flags_the_overrun(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with budget(ts_env.client, task_queue) as handle:
        within = await reserve(handle, ask("w1", monthly=0.15, mode="warn"))
        over = await reserve(handle, ask("w2", monthly=0.15, mode="warn"))
        await settle(handle, "w1", 0.10)
        await settle(handle, "w2", 0.10)
        view = await snap(handle)
    assert within.granted and not within.over_budget
    assert over.granted and over.over_budget and over.amount_usd == pytest.approx(CALL)
    assert "on_exceeded: warn" in over.reason and "of $0.15" in over.reason
    assert view.spent_usd == pytest.approx(0.20)
    assert view.overrun_usd == pytest.approx(0.05)


async def test_each_key_applies_once(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    async with budget(ts_env.client, task_queue) as handle:
        first = await reserve(handle, ask("k1"))
        again = await reserve(handle, ask("k1"))
        assert again == first and (await snap(handle)).reserved_usd == pytest.approx(CALL)
        await settle(handle, "k1", 0.04)
        await settle(handle, "k1", 0.04)
        await release(handle, "k1")  # after a settle: nothing to free
        assert await reserve(handle, ask("k1")) == first  # a late repeat gets the same grant
        await reserve(handle, ask("k2"))
        await release(handle, "k2")
        await release(handle, "k2")
        await settle(handle, "k2", 0.09)  # contradicts the release: ignored
        reuse = await reserve(handle, ask("k2"))
        view = await snap(handle)
    assert view.spent_usd == pytest.approx(0.04) and view.reserved_usd == 0
    assert not reuse.granted and "already released" in reuse.reason


async def test_a_call_straddling_the_month_boundary_is_charged_to_the_month_it_reserved_in(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with budget(ts_env.client, task_queue, reservation_ttl_seconds=40 * 86400) as handle:
        straddling = await reserve(handle, ask("old", amount=0.40, minimum=0.40))
        before = await snap(handle)
        await ts_env.sleep(timedelta(days=31))  # whatever day it is, this lands in a later month
        rolled = await snap(handle)  # the workflow's own timer rolled the period over
        fresh = await reserve(handle, ask("new", amount=CAP, minimum=CAP))
        await settle(handle, "old", 0.30)
        await settle(handle, "new", 0.20)
        after = await snap(handle)
    assert straddling.period == before.period
    assert rolled.period != before.period and rolled.spent_usd == 0
    assert fresh.granted and fresh.period == rolled.period  # the old hold does not count here
    assert after.spent_usd == pytest.approx(0.20)
    old = next(p for p in after.previous if p.period == before.period)
    assert old.spent_usd == pytest.approx(0.30) and old.by_channel == {"slack:C1": pytest.approx(0.30)}


async def test_a_hold_nobody_settles_is_released_once_after_its_ttl(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with budget(ts_env.client, task_queue, reservation_ttl_seconds=3600) as handle:
        crashed = await reserve(handle, ask("crashed", amount=0.40, minimum=0.40))
        assert not (await reserve(handle, ask("blocked", amount=0.40, minimum=0.40))).granted
        await ts_env.sleep(timedelta(minutes=61))
        expired = await snap(handle)  # released by the workflow's timer, with no update
        await release(handle, "crashed")
        await release(handle, "crashed")
        refill = await reserve(handle, ask("refill", amount=CAP, minimum=CAP))
        await settle(handle, "crashed", 0.05)  # it did run after all: the money is charged, once
        await settle(handle, "crashed", 0.05)
        view = await snap(handle)
    assert crashed.granted and expired.reserved_usd == 0 and expired.active_holds == 0
    assert refill.granted and refill.amount_usd == pytest.approx(CAP)
    assert view.spent_usd == pytest.approx(0.05) and view.reserved_usd == pytest.approx(CAP)


async def test_continue_as_new_carries_the_ledger(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    async with budget(ts_env.client, task_queue, max_updates_per_run=3) as handle:
        first_run = (await handle.describe()).run_id
        grants = [await reserve(handle, ask(f"c{n}", amount=0.05, minimum=0.05)) for n in range(6)]
        for grant in grants[:4]:
            await settle(handle, grant.key, 0.05)
        await settle(handle, "c0", 0.05)  # from two runs ago: still applies once
        assert await reserve(handle, ask("c5", amount=0.05, minimum=0.05)) == grants[5]
        view = await snap(handle)
        last_run = (await handle.describe()).run_id
    assert view.runs >= 3 and last_run != first_run
    assert view.spent_usd == pytest.approx(0.20) and view.reserved_usd == pytest.approx(0.10)
    assert view.active_holds == 2 and view.period == period_of(
        datetime.fromisoformat(grants[0].reserved_at_iso)
    )


async def test_invalid_requests_are_rejected_before_they_touch_the_ledger(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    from temporalio.client import WorkflowUpdateFailedError

    async with budget(ts_env.client, task_queue) as handle:
        with pytest.raises(WorkflowUpdateFailedError):
            await reserve(handle, ask("bad", amount=-1.0))
        with pytest.raises(WorkflowUpdateFailedError):
            await reserve(handle, ask("bad", mode="ignore"))
        view = await snap(handle)
    assert view.reserved_usd == 0 and view.active_holds == 0


def test_worst_case_and_the_max_tokens_that_fit_a_grant() -> None:
    prices = (3e-6, 15e-6)  # per token, input and output
    worst = worst_case_usd(1000, 4000, prices)
    assert worst == pytest.approx(0.063)
    assert affordable_max_tokens(worst, 1000, prices, 4000) == 4000
    fits = affordable_max_tokens(0.018, 1000, prices, 4000)
    assert fits == 1000 and worst_case_usd(1000, fits, prices) <= 0.018 + 1e-9
    assert affordable_max_tokens(0.002, 1000, prices, 4000) == 0


async def test_tasks_reserve_through_update_with_start_on_the_dev_server(
    client: Client, task_queue: str
) -> None:
    """No budget workflow exists yet: twenty concurrent first reservations start exactly one."""
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=task_queue, workflows=[AgentBudgetWorkflow], workflow_runner=workflow_runner()
    ):

        async def one(n: int) -> ReserveResult:
            return await reserve_budget(
                client, task_queue, "ws", agent, f"t{n}:1:1:m", "slack:C1", CALL, CALL, CAP, None, "block"
            )

        grants = await asyncio.gather(*(one(n) for n in range(20)))
        granted = [g for g in grants if g.granted]
        for grant in granted[:3]:
            await settle_budget(client, task_queue, "ws", agent, grant.key, "slack:C1", 0.08)
        for grant in granted[3:]:
            await release_budget(client, task_queue, "ws", agent, grant.key)
            await release_budget(client, task_queue, "ws", agent, grant.key)
        handle: Handle = client.get_workflow_handle_for(
            AgentBudgetWorkflow.run, budget_workflow_id("ws", agent)
        )
        view = await handle.query(AgentBudgetWorkflow.snapshot)
        await handle.terminate()
    assert len(granted) == 5
    assert view.spent_usd == pytest.approx(0.24) and view.reserved_usd == 0


def test_the_ledger_at_an_exact_month_boundary_and_expiry_on_the_next_update() -> None:
    """The pure ledger with chosen clocks: one second before and after midnight UTC."""
    from datetime import UTC

    from workflows.budget_ledger import BudgetLedger, new_state

    before = datetime(2025, 1, 31, 23, 59, 59, tzinfo=UTC)
    after = before + timedelta(seconds=2)
    ledger = BudgetLedger(new_state(before), ttl=timedelta(hours=1))
    late = ledger.reserve(ask("late", amount=0.40, minimum=0.40), before)
    fresh = ledger.reserve(ask("fresh", amount=CAP, minimum=CAP), after)  # February: a full cap
    ledger.settle(SettleRequest("late", 0.30), after)
    assert (late.period, fresh.period) == ("2025-01", "2025-02") and fresh.granted
    view = ledger.snapshot("ws", "a")
    assert view.period == "2025-02" and view.spent_usd == 0 and view.reserved_usd == pytest.approx(CAP)
    assert [(p.period, p.spent_usd) for p in view.previous] == [("2025-01", pytest.approx(0.30))]
    # No timer here: the next update after the TTL releases the forgotten hold, once.
    again = ledger.reserve(ask("again", amount=CAP, minimum=CAP), after + timedelta(hours=1, seconds=1))
    assert again.granted and ledger.snapshot("ws", "a").reserved_usd == pytest.approx(CAP)
