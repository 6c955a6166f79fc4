"""The usage meter: what a task has spent, its ceilings, and what the next call may spend.

Workflow code: deterministic, no I/O. Ceilings are always on (the agent config has safe
defaults) and checked before every model call; `grant` clamps the call's `max_tokens` so it
cannot overshoot. Ceilings change only when an approver extends them, so they are computed
once per extension, not on every look.
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from config.agent import AgentConfig
    from workflows import budget
    from workflows.types import BudgetExtension, BudgetGrant, BudgetUsage, ModelUsage


class UsageMeter:
    def __init__(self, agent: AgentConfig, usage: BudgetUsage) -> None:
        self.agent = agent
        self.usage = usage
        self.ceilings = budget.Ceilings.for_agent(agent, usage)

    def check(self, started_at_iso: str) -> budget.CeilingHit | None:
        return budget.check_ceilings(self.ceilings, self.usage, self.active_seconds(started_at_iso))

    def active_seconds(self, started_at_iso: str) -> float:
        """Wall clock since the start, less the time spent waiting on humans."""
        started = datetime.fromisoformat(started_at_iso)
        return (workflow.now() - started).total_seconds() - self.usage.waited_seconds

    def should_wrap_up(self) -> bool:
        return budget.should_wrap_up(self.ceilings, self.usage)

    def grant(self) -> BudgetGrant:
        return BudgetGrant(
            max_tokens=budget.clamp_max_tokens(self.ceilings, self.usage),
            usd_headroom=budget.usd_headroom(self.ceilings, self.usage),
            token_headroom=budget.token_headroom(self.ceilings, self.usage),
        )

    def charge(self, usage: ModelUsage, *, iteration: bool) -> None:
        self.usage.iterations += 1 if iteration else 0
        self.usage.prompt_tokens += usage.prompt_tokens
        self.usage.completion_tokens += usage.completion_tokens
        self.usage.cost_usd += usage.cost_usd

    def extend(self, extension: BudgetExtension) -> None:
        self.usage.extra_usd += max(0.0, extension.usd)
        self.usage.extra_tokens += max(0, extension.tokens)
        self.usage.extra_iterations += max(0, extension.iterations)
        self.ceilings = budget.Ceilings.for_agent(self.agent, self.usage)

    def waited(self, seconds: float) -> None:
        self.usage.waited_seconds += seconds
