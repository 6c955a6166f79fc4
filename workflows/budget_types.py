"""Types of the per-agent budget workflow (`openloop.AgentBudget`) and its period arithmetic.

Model activities reserve from this workflow before a call and settle after it; the request
and result dataclasses here cross that boundary. Add fields with defaults only: running
budget workflows carry these shapes across continue-as-new.

Amounts are USD floats; comparisons allow `EPSILON_USD` so five reservations of $0.10 fit a
$0.50 cap exactly. Pure: no I/O, imported by workflow code through the sandbox pass-through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

BUDGET_WORKFLOW_NAME = "openloop.AgentBudget"
EPSILON_USD = 1e-9


def budget_workflow_id(workspace: str, agent: str) -> str:
    """One budget workflow per agent: every task of the agent reserves from the same one."""
    return f"budget-{workspace}-{agent}"


def period_of(now: datetime) -> str:
    """The budget period containing `now`: its calendar month in UTC, e.g. `2025-01`."""
    utc = now.astimezone(UTC)
    return f"{utc.year:04d}-{utc.month:02d}"


def next_period_start(now: datetime) -> datetime:
    """Midnight UTC on the first day of the month after `now`."""
    utc = now.astimezone(UTC)
    if utc.month == 12:
        return datetime(utc.year + 1, 1, 1, tzinfo=UTC)
    return datetime(utc.year, utc.month + 1, 1, tzinfo=UTC)


class HoldState:
    """What became of a reservation; kept per key so a repeated settle or release applies once."""

    HELD = "held"
    SETTLED = "settled"
    RELEASED = "released"  # the call failed and gave it back
    EXPIRED = "expired"  # nobody settled it within the TTL: released by the workflow


@dataclass
class ReserveRequest:
    """Hold up to `amount_usd` (the call's worst case) for the call identified by `key`."""

    key: str  # idempotency key: one reservation per key
    channel: str
    amount_usd: float  # worst case: prompt tokens at the input price + max_tokens at the output price
    minimum_usd: float  # below this the call cannot do anything useful: refuse rather than grant less
    monthly_usd: float | None = None  # the agent's cap, as its config says now
    channel_monthly_usd: float | None = None  # the cap of each channel the agent serves
    on_exceeded: str = "block"  # block | warn


@dataclass
class ReserveResult:
    key: str
    granted: bool
    amount_usd: float  # held for this call; the caller clamps max_tokens to fit it
    period: str  # the period the call is charged to, even if it settles after the boundary
    channel: str
    reserved_at_iso: str
    over_budget: bool = False  # warn mode let through a call the caps could not cover
    reason: str = ""  # why it was refused or flagged; names the cap and its figures
    agent_left_usd: float | None = None  # headroom before this grant (None: no cap)
    channel_left_usd: float | None = None


@dataclass
class SettleRequest:
    """The call finished and cost `cost_usd`: charge it and free the rest of the hold."""

    key: str
    cost_usd: float
    channel: str = ""  # used only if the workflow has no record of the key


@dataclass
class ReleaseRequest:
    """The call failed or crashed before costing anything known: free the hold."""

    key: str


@dataclass
class Hold:
    """A key's record: the grant it got and what became of it."""

    grant: ReserveResult
    state: str = HoldState.HELD
    finished_at_iso: str = ""
    cost_usd: float = 0.0


@dataclass
class PeriodTotals:
    period: str
    spent_usd: float = 0.0
    by_channel: dict[str, float] = field(default_factory=dict)
    overrun_usd: float = 0.0  # spent beyond a cap (warn mode, or a call that cost more than held)
    calls: int = 0


@dataclass
class BudgetState:
    """Everything carried across continue-as-new."""

    period: str
    periods: list[PeriodTotals]  # the current period first, then older ones
    holds: dict[str, Hold] = field(default_factory=dict)
    monthly_usd: float | None = None
    channel_monthly_usd: float | None = None
    on_exceeded: str = "block"
    runs: int = 1


@dataclass
class BudgetInput:
    workspace: str
    agent: str
    reservation_ttl_seconds: float = 3600.0  # a hold nobody settles is released after this
    max_updates_per_run: int = 500  # continue-as-new after this many updates (history stays small)
    state: BudgetState | None = None


@dataclass
class ChannelUsage:
    spent_usd: float = 0.0
    reserved_usd: float = 0.0


@dataclass
class BudgetSnapshot:
    workspace: str
    agent: str
    period: str
    monthly_usd: float | None
    channel_monthly_usd: float | None
    on_exceeded: str
    spent_usd: float
    reserved_usd: float
    overrun_usd: float
    channels: dict[str, ChannelUsage]
    active_holds: int
    previous: list[PeriodTotals]  # earlier periods' totals, newest first
    runs: int
