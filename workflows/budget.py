"""Per-task ceilings: pure arithmetic on workflow state, checked before every model call.

Iterations, tokens, USD and wall clock are always on (the agent config has safe defaults).
`max_tokens` is clamped to the tokens left so a call cannot overshoot the token ceiling;
the USD clamp needs prices, so the model activity applies it from `usd_headroom`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from config.agent import AgentConfig
from workflows.types import BudgetUsage, TaskStatus

WRAP_UP_ITERATIONS_LEFT = 2  # tell the model to wrap up when this few iterations remain
MIN_USEFUL_MAX_TOKENS = 16  # below this a call cannot say anything useful


def usd(amount: float) -> str:
    """A dollar amount a person can read: whole cents as $0.50, anything smaller with at
    least two significant digits ($0.00042, never $0.0000)."""
    if not math.isfinite(amount):
        return f"${amount}"
    cents = amount * 100
    if abs(cents - round(cents)) < 1e-6:
        return f"${amount:,.2f}"
    decimals = max(4, 1 - math.floor(math.log10(abs(amount))))
    text = f"{amount:,.{decimals}f}".rstrip("0")
    whole, _, fraction = text.partition(".")
    return f"${whole}.{fraction.ljust(2, '0')}"


@dataclass(frozen=True)
class Ceilings:
    max_iterations: int
    token_limit: int
    usd_limit: float
    wall_clock_seconds: float
    max_output_tokens: int

    @classmethod
    def for_agent(cls, agent: AgentConfig, usage: BudgetUsage) -> Ceilings:
        spec = agent.spec
        return cls(
            max_iterations=spec.limits.max_iterations + usage.extra_iterations,
            token_limit=spec.limits.token_limit + usage.extra_tokens,
            usd_limit=spec.budget.per_task_usd + usage.extra_usd,
            wall_clock_seconds=spec.limits.wall_clock_seconds,
            max_output_tokens=spec.model_policy.max_output_tokens,
        )

    def as_dict(self) -> dict[str, float]:
        return {
            "max_iterations": self.max_iterations,
            "token_limit": self.token_limit,
            "usd_limit": self.usd_limit,
            "wall_clock_seconds": self.wall_clock_seconds,
        }


@dataclass(frozen=True)
class CeilingHit:
    status: TaskStatus
    ceiling: str  # iterations | tokens | usd | wall_clock
    reason: str
    next_action: str
    resumable: bool  # an approver can extend this ceiling and the task resumes


def check_ceilings(ceilings: Ceilings, usage: BudgetUsage, elapsed_seconds: float) -> CeilingHit | None:
    if elapsed_seconds >= ceilings.wall_clock_seconds:
        return CeilingHit(
            TaskStatus.BUDGET_EXHAUSTED,
            "wall_clock",
            f"ran for {elapsed_seconds:.0f}s, past the wall-clock limit of "
            f"{ceilings.wall_clock_seconds:.0f}s",
            "The wall clock cannot be extended, so the task stops: raise spec.limits.wall_clock "
            "and re-apply the agent (`openloop agents apply -f FILE`), or split the request "
            "into smaller tasks, then ask again.",
            resumable=False,
        )
    if usage.iterations >= ceilings.max_iterations:
        return CeilingHit(
            TaskStatus.BUDGET_EXHAUSTED,
            "iterations",
            f"used all {ceilings.max_iterations} iterations",
            "The task waits: `openloop extend TASK_ID --iterations N` resumes it; raise "
            "spec.limits.max_iterations for later tasks.",
            resumable=True,
        )
    if usage.tokens + MIN_USEFUL_MAX_TOKENS > ceilings.token_limit:
        return CeilingHit(
            TaskStatus.BUDGET_EXHAUSTED,
            "tokens",
            f"used {usage.tokens} of {ceilings.token_limit} tokens",
            "The task waits: `openloop extend TASK_ID --tokens N` resumes it; raise "
            "spec.limits.token_limit for later tasks.",
            resumable=True,
        )
    if usage.cost_usd >= ceilings.usd_limit:
        return CeilingHit(
            TaskStatus.BUDGET_EXHAUSTED,
            "usd",
            f"spent {usd(usage.cost_usd)} of its {usd(ceilings.usd_limit)} per-task budget",
            "The task waits: `openloop extend TASK_ID --usd 0.50` resumes it; raise "
            "spec.budget.per_task_usd for later tasks.",
            resumable=True,
        )
    return None


def clamp_max_tokens(ceilings: Ceilings, usage: BudgetUsage) -> int:
    """Output tokens a call may use: never more than the tokens left under the ceiling."""
    return max(0, min(ceilings.max_output_tokens, ceilings.token_limit - usage.tokens))


def usd_headroom(ceilings: Ceilings, usage: BudgetUsage) -> float:
    return max(0.0, ceilings.usd_limit - usage.cost_usd)


def token_headroom(ceilings: Ceilings, usage: BudgetUsage) -> int:
    return max(0, ceilings.token_limit - usage.tokens)


def should_wrap_up(ceilings: Ceilings, usage: BudgetUsage) -> bool:
    return ceilings.max_iterations - usage.iterations <= WRAP_UP_ITERATIONS_LEFT
