"""AgentBudgetWorkflow: one long-lived workflow per agent holding its monthly budgets as state.

Model activities `reserve` the worst case of a call before making it and `settle` the actual
cost after (or `release` the hold when the call fails). Updates to one workflow run one at a
time, so any number of concurrent tasks cannot together reserve more than the agent's
`monthly_usd` or a channel's `per_channel_monthly_usd`. The arithmetic lives in
`workflows.budget_ledger`; this module adds time and durability:

- the period rolls over at the month boundary (UTC) by a durable timer, and a hold nobody
  settles within its TTL (the activity's worker died) is released by the next update or by
  the timer, whichever comes first, once;
- history stays small: the workflow continues-as-new after `max_updates_per_run` updates or
  when Temporal suggests it, after its handlers finish, carrying its state.

Deterministic: no I/O, no clock but workflow.now().
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.budget_ledger import BudgetLedger, new_state
    from workflows.budget_types import (
        BUDGET_WORKFLOW_NAME,
        BudgetInput,
        BudgetSnapshot,
        ReleaseRequest,
        ReserveRequest,
        ReserveResult,
        SettleRequest,
        budget_workflow_id,
    )

__all__ = ["AgentBudgetWorkflow", "budget_workflow_id"]

MIN_TIMER = timedelta(seconds=1)


@workflow.defn(name=BUDGET_WORKFLOW_NAME)
class AgentBudgetWorkflow:
    @workflow.init
    def __init__(self, inp: BudgetInput) -> None:
        self.inp = inp
        state = inp.state or new_state(workflow.now())
        self.ledger = BudgetLedger(state, timedelta(seconds=inp.reservation_ttl_seconds))
        self.updates_this_run = 0
        self.wake_at: datetime | None = None  # when the run loop's timer fires
        self.rearm = False  # a new hold expires before wake_at: restart the timer

    @workflow.run
    async def run(self, inp: BudgetInput) -> None:
        while True:
            self.ledger.tidy(workflow.now())
            self.wake_at = self.ledger.next_deadline(workflow.now())
            self.rearm = False
            try:
                await workflow.wait_condition(
                    lambda: self.rearm or self._should_continue_as_new(),
                    timeout=max(self.wake_at - workflow.now(), MIN_TIMER),
                )
            except TimeoutError:
                pass  # a period boundary or a hold's TTL: tidied at the top of the loop
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                self.ledger.tidy(workflow.now())
                self.ledger.state.runs += 1
                workflow.continue_as_new(
                    BudgetInput(
                        workspace=inp.workspace,
                        agent=inp.agent,
                        reservation_ttl_seconds=inp.reservation_ttl_seconds,
                        max_updates_per_run=inp.max_updates_per_run,
                        state=self.ledger.state,
                    )
                )

    @workflow.update
    def reserve(self, req: ReserveRequest) -> ReserveResult:
        self.updates_this_run += 1
        now = workflow.now()
        grant = self.ledger.reserve(req, now)
        if grant.granted and (self.wake_at is None or now + self.ledger.ttl < self.wake_at):
            self.rearm = True
        return grant

    @reserve.validator
    def _validate_reserve(self, req: ReserveRequest) -> None:
        # A rejected update never reaches history or the ledger.
        if not req.key:
            raise ValueError("a reservation needs a key")
        for name, value in (("amount_usd", req.amount_usd), ("minimum_usd", req.minimum_usd)):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite amount of at least 0, not {value}")
        if req.on_exceeded not in ("block", "warn"):
            raise ValueError(f"on_exceeded must be block or warn, not {req.on_exceeded!r}")

    @workflow.update
    def settle(self, req: SettleRequest) -> None:
        self.updates_this_run += 1
        self.ledger.settle(req, workflow.now())

    @settle.validator
    def _validate_settle(self, req: SettleRequest) -> None:
        if not req.key:
            raise ValueError("a settlement needs a key")
        if not math.isfinite(req.cost_usd) or req.cost_usd < 0:
            raise ValueError(f"cost_usd must be a finite amount of at least 0, not {req.cost_usd}")

    @workflow.update
    def release(self, req: ReleaseRequest) -> None:
        self.updates_this_run += 1
        self.ledger.release(req, workflow.now())

    @workflow.query
    def snapshot(self) -> BudgetSnapshot:
        return self.ledger.snapshot(self.inp.workspace, self.inp.agent)

    def _should_continue_as_new(self) -> bool:
        return (
            self.updates_this_run >= self.inp.max_updates_per_run
            or workflow.info().is_continue_as_new_suggested()
        )
