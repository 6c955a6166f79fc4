"""A model call's hold on the agent's monthly budget: reserve, then settle or release.

When the agent has a monthly budget (its own or per channel), a call first reserves its
worst case from the agent's budget workflow (`openloop.AgentBudget`), clamps max_tokens to
the grant, and settles the actual cost after. A call that fails, or ends without charging
anything, releases its hold before its own error propagates. Settling and releasing never
raise: the answer is paid for, and a hold left behind is released after its TTL.

Used only inside the model activity (it needs the activity's client and task queue).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from temporalio import activity

from activities.llm.budget_client import (
    affordable_max_tokens,
    release_budget,
    reservation_key,
    reserve_budget,
    settle_budget,
    worst_case_usd,
)
from activities.runtime import runtime
from activities.store import ledger
from workflows.budget import MIN_USEFUL_MAX_TOKENS
from workflows.budget_types import ReserveResult
from workflows.types import AuditEvent, ModelCallInput


@dataclass
class BudgetHold:
    """What the call may use under the hold, and what it cost once answered."""

    max_tokens: int
    refused: str | None = None  # why the budget workflow refused: the call must not be made
    reservation: ReserveResult | None = None  # None: nothing held (no monthly budget, no price)
    cost_usd: float | None = None  # set by `charge` once the provider answered

    def charge(self, cost_usd: float) -> None:
        self.cost_usd = cost_usd


@asynccontextmanager
async def budget_hold(
    inp: ModelCallInput, model: str, prompt_tokens: int, max_tokens: int, prices: tuple[float, float] | None
) -> AsyncIterator[BudgetHold]:
    """Hold the call's worst case for the body; check `refused` first, `charge` the cost."""
    task = inp.task
    # A model without a price under `warn` cannot be held; it goes through unreserved.
    if prices is None or (task.monthly_usd is None and task.channel_monthly_usd is None):
        yield BudgetHold(max_tokens)
        return
    reservation = await _reserve(inp, model, prompt_tokens, max_tokens, prices)
    if not reservation.granted:
        # A per-task extension cannot lift a monthly cap: the caller stops the task.
        yield BudgetHold(0, refused=reservation.reason)
        return
    hold = BudgetHold(
        affordable_max_tokens(reservation.amount_usd, prompt_tokens, prices, max_tokens),
        reservation=reservation,
    )
    try:
        yield hold
    except BaseException:
        await _release(inp, reservation)
        raise
    if hold.cost_usd is None:
        await _release(inp, reservation)
    else:
        await _settle(inp, reservation, hold.cost_usd)


async def _reserve(
    inp: ModelCallInput, model: str, prompt_tokens: int, max_tokens: int, prices: tuple[float, float]
) -> ReserveResult:
    """Hold the call's worst case in the agent's budget workflow, one key per attempt and
    model; the workflow runs on this activity's task queue."""
    task = inp.task
    return await reserve_budget(
        activity.client(),
        activity.info().task_queue,
        task.workspace,
        task.agent_name,
        reservation_key(inp.task_id, inp.step, activity.info().attempt, model),
        f"{task.surface}:{task.channel}",
        amount_usd=worst_case_usd(prompt_tokens, max_tokens, prices),
        minimum_usd=worst_case_usd(prompt_tokens, MIN_USEFUL_MAX_TOKENS, prices),
        monthly_usd=task.monthly_usd,
        channel_monthly_usd=task.channel_monthly_usd,
        on_exceeded=task.on_exceeded,
    )


async def _settle(inp: ModelCallInput, hold: ReserveResult, cost_usd: float) -> None:
    """Charge the actual cost. The answer is paid for, so a failure here is logged, not raised
    (raising would ask the model again); the hold is then released after its TTL."""
    task = inp.task
    try:
        await settle_budget(
            activity.client(),
            activity.info().task_queue,
            task.workspace,
            task.agent_name,
            hold.key,
            hold.channel,
            cost_usd,
        )
    except Exception as err:  # noqa: BLE001 - see the docstring
        activity.logger.warning("could not settle budget hold %s: %s", hold.key, err)
    if hold.over_budget:
        pool = await runtime().pool()
        async with pool.connection() as conn:
            await ledger.write_audit(
                conn,
                AuditEvent(
                    task_id=inp.task_id,
                    step=inp.step,
                    key=f"{hold.key}:budget_overrun",
                    agent=task.agent_name,
                    workspace=task.workspace,
                    channel=task.channel,
                    kind="budget_overrun",
                    actor=task.agent_name,
                    outcome=f"{hold.reason}; the call cost ${cost_usd:.4f}",
                ),
            )


async def _release(inp: ModelCallInput, hold: ReserveResult) -> None:
    """Free the hold of a failed call; the call's own error is what propagates."""
    try:
        task = inp.task
        await release_budget(
            activity.client(), activity.info().task_queue, task.workspace, task.agent_name, hold.key
        )
    except Exception as err:  # noqa: BLE001 - the hold is released after its TTL instead
        activity.logger.warning("could not release budget hold %s: %s", hold.key, err)
