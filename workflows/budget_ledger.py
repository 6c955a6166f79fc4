"""The arithmetic of an agent's monthly budgets: holds, charges, periods. Pure and deterministic.

`AgentBudgetWorkflow` owns one `BudgetLedger` and passes it `workflow.now()`; nothing here
reads a clock or does I/O, so the same calls replay to the same state.

- A grant is min(requested, headroom under the agent cap and the channel cap), where
  headroom = cap - spent this period - held by calls in flight this period. Below the
  request's minimum it is refused under `block` (the reason names the cap and its figures)
  and let through in full, flagged, under `warn`.
- Every key applies once; a hold is charged to the period it was reserved in.
- A hold past its TTL expires (is released) once; a settle that arrives later still charges
  the actual cost once, because that money was spent.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from workflows.budget_types import (
    EPSILON_USD,
    BudgetSnapshot,
    BudgetState,
    ChannelUsage,
    Hold,
    HoldState,
    PeriodTotals,
    ReleaseRequest,
    ReserveRequest,
    ReserveResult,
    SettleRequest,
    next_period_start,
    period_of,
)

PERIODS_KEPT = 4  # the current month and the three before it
FINISHED_HOLD_MEMORY = timedelta(days=1)  # how long a settled/released key is remembered
MAX_FINISHED_HOLDS = 2000  # bounds the state carried across continue-as-new


def new_state(now: datetime) -> BudgetState:
    period = period_of(now)
    return BudgetState(period=period, periods=[PeriodTotals(period)])


class BudgetLedger:
    def __init__(self, state: BudgetState, ttl: timedelta) -> None:
        self.state = state
        self.ttl = ttl

    # Changes -------------------------------------------------------------------------------

    def reserve(self, req: ReserveRequest, now: datetime) -> ReserveResult:
        self.tidy(now)
        known = self.state.holds.get(req.key)
        if known is not None:
            if known.state in (HoldState.HELD, HoldState.SETTLED):
                return known.grant
            reason = f"reservation {req.key} was already {known.state}; a new attempt needs a new key"
            return self._result(req, now, 0.0, None, None, reason, granted=False)
        self.state.monthly_usd = req.monthly_usd
        self.state.channel_monthly_usd = req.channel_monthly_usd
        self.state.on_exceeded = req.on_exceeded
        agent_left = self._left(req.monthly_usd, None)
        channel_left = self._left(req.channel_monthly_usd, req.channel)
        caps = [left for left in (agent_left, channel_left) if left is not None]
        headroom = min(caps) if caps else math.inf
        minimum = min(req.minimum_usd, req.amount_usd)
        if headroom + EPSILON_USD >= minimum:
            amount = min(req.amount_usd, max(0.0, headroom))
            grant = self._result(req, now, amount, agent_left, channel_left, "")
        else:
            short = self._shortfall(req, minimum, agent_left, channel_left)
            if req.on_exceeded != "warn":
                return self._result(req, now, 0.0, agent_left, channel_left, short, granted=False)
            reason = f"over budget, let through (on_exceeded: warn): {short}"
            grant = self._result(req, now, req.amount_usd, agent_left, channel_left, reason)
            grant.over_budget = True
        self.state.holds[req.key] = Hold(grant=grant)
        return grant

    def settle(self, req: SettleRequest, now: datetime) -> None:
        self.tidy(now)
        hold = self.state.holds.get(req.key)
        if hold is None:
            # Unknown key (the state was lost, or the key forgotten long ago): the money was
            # spent, so it is charged to the current period rather than dropped.
            grant = ReserveResult(
                req.key,
                False,
                0.0,
                self.state.period,
                req.channel,
                now.isoformat(),
                reason="settled without a reservation",
            )
            hold = self.state.holds[req.key] = Hold(grant=grant)
        elif hold.state not in (HoldState.HELD, HoldState.EXPIRED):
            return  # already settled, or released by the caller: applies once
        self._charge(hold.grant.period, hold.grant.channel, req.cost_usd)
        self._finish(hold, HoldState.SETTLED, now, req.cost_usd)

    def release(self, req: ReleaseRequest, now: datetime) -> None:
        self.tidy(now)
        hold = self.state.holds.get(req.key)
        if hold is not None and hold.state == HoldState.HELD:
            self._finish(hold, HoldState.RELEASED, now)

    def tidy(self, now: datetime) -> None:
        """Roll the period over, expire holds past their TTL, forget old finished keys."""
        period = period_of(now)
        if period != self.state.period:
            self.state.period = period
            self._totals(period)
        for hold in self._held(None):
            if datetime.fromisoformat(hold.grant.reserved_at_iso) + self.ttl <= now:
                self._finish(hold, HoldState.EXPIRED, now)
        finished = [(k, h) for k, h in self.state.holds.items() if h.state != HoldState.HELD]
        forget = {
            k for k, h in finished if datetime.fromisoformat(h.finished_at_iso) + FINISHED_HOLD_MEMORY <= now
        }
        forget |= {k for k, _ in finished[: max(0, len(finished) - MAX_FINISHED_HOLDS)]}
        for key in forget:
            del self.state.holds[key]

    # Views ---------------------------------------------------------------------------------

    def next_deadline(self, now: datetime) -> datetime:
        """When `tidy` next has work: the period boundary or the first hold's TTL."""
        deadlines = [next_period_start(now)]
        deadlines += [datetime.fromisoformat(h.grant.reserved_at_iso) + self.ttl for h in self._held(None)]
        return min(deadlines)

    def snapshot(self, workspace: str, agent: str) -> BudgetSnapshot:
        period = self.state.period
        current = next((p for p in self.state.periods if p.period == period), PeriodTotals(period))
        channels = {name: ChannelUsage(spent_usd=spent) for name, spent in current.by_channel.items()}
        reserved = 0.0
        for hold in self._held(period):
            reserved += hold.grant.amount_usd
            channels.setdefault(hold.grant.channel, ChannelUsage()).reserved_usd += hold.grant.amount_usd
        return BudgetSnapshot(
            workspace=workspace,
            agent=agent,
            period=period,
            monthly_usd=self.state.monthly_usd,
            channel_monthly_usd=self.state.channel_monthly_usd,
            on_exceeded=self.state.on_exceeded,
            spent_usd=current.spent_usd,
            reserved_usd=reserved,
            overrun_usd=current.overrun_usd,
            channels=channels,
            active_holds=len(self._held(None)),
            previous=[p for p in self.state.periods if p.period != period],
            runs=self.state.runs,
        )

    # Internals -----------------------------------------------------------------------------

    def _charge(self, period: str, channel: str, cost: float) -> None:
        totals = self._totals(period)
        spent_before, channel_before = totals.spent_usd, totals.by_channel.get(channel, 0.0)
        totals.spent_usd += cost
        totals.by_channel[channel] = channel_before + cost
        totals.calls += 1
        # The overrun is what this charge added beyond a cap (warn mode, or a call that cost
        # more than its estimate); the larger of the agent's and the channel's.
        over = 0.0
        for cap, before in (
            (self.state.monthly_usd, spent_before),
            (self.state.channel_monthly_usd, channel_before),
        ):
            if cap is not None:
                over = max(over, max(0.0, before + cost - cap) - max(0.0, before - cap))
        totals.overrun_usd += over

    def _finish(self, hold: Hold, state: str, now: datetime, cost: float = 0.0) -> None:
        hold.state, hold.cost_usd, hold.finished_at_iso = state, cost, now.isoformat()
        # Re-insert so the dict stays ordered by finish time: the oldest are forgotten first.
        del self.state.holds[hold.grant.key]
        self.state.holds[hold.grant.key] = hold

    def _totals(self, period: str) -> PeriodTotals:
        for totals in self.state.periods:
            if totals.period == period:
                return totals
        totals = PeriodTotals(period)
        self.state.periods.append(totals)
        self.state.periods.sort(key=lambda p: p.period, reverse=True)
        del self.state.periods[PERIODS_KEPT:]
        return totals

    def _held(self, period: str | None) -> list[Hold]:
        return [
            h
            for h in self.state.holds.values()
            if h.state == HoldState.HELD and (period is None or h.grant.period == period)
        ]

    def _left(self, cap: float | None, channel: str | None) -> float | None:
        """Headroom under a cap this period: the cap minus what is spent and what is held."""
        if cap is None:
            return None
        totals = self._totals(self.state.period)
        spent = totals.spent_usd if channel is None else totals.by_channel.get(channel, 0.0)
        held = sum(
            h.grant.amount_usd
            for h in self._held(self.state.period)
            if channel is None or h.grant.channel == channel
        )
        return cap - spent - held

    def _shortfall(
        self, req: ReserveRequest, minimum: float, agent_left: float | None, channel_left: float | None
    ) -> str:
        """Which cap cannot cover the call, with its figures, for the reply a person reads."""
        totals = self._totals(self.state.period)
        parts = []
        for label, cap, left, spent in (
            ("the agent's monthly budget", req.monthly_usd, agent_left, totals.spent_usd),
            (
                f"the monthly budget of channel {req.channel}",
                req.channel_monthly_usd,
                channel_left,
                totals.by_channel.get(req.channel, 0.0),
            ),
        ):
            if cap is not None and left is not None and left + EPSILON_USD < minimum:
                parts.append(
                    f"{label} of {usd(cap)} for {self.state.period} has {usd(max(0.0, left))} "
                    f"left ({usd(spent)} spent, {usd(cap - spent - left)} held by calls in flight)"
                )
        return "; ".join(parts) + f"; the call needs at least {usd(minimum)}"

    def _result(
        self,
        req: ReserveRequest,
        now: datetime,
        amount: float,
        agent_left: float | None,
        channel_left: float | None,
        reason: str,
        *,
        granted: bool = True,
    ) -> ReserveResult:
        return ReserveResult(
            key=req.key,
            granted=granted,
            amount_usd=amount,
            period=self.state.period,
            channel=req.channel,
            reserved_at_iso=now.isoformat(),
            reason=reason,
            agent_left_usd=agent_left,
            channel_left_usd=channel_left,
        )


def usd(amount: float) -> str:
    """Whole cents as $0.50; fractions of a cent (cheap models) with four decimals."""
    cents = amount * 100
    return f"${amount:,.2f}" if abs(cents - round(cents)) < 1e-6 else f"${amount:,.4f}"
