"""What a person reads when a budget stops a task: which budget, whether it resumes, what
helps, and amounts small enough to need more than four decimals."""

from __future__ import annotations

import pytest

from workflows import budget
from workflows.outcomes import budget_stop, next_action, status_line
from workflows.types import BudgetUsage, TaskStatus

# The texts the model activity stops a task with when a monthly cap refuses a call: the
# reason comes from workflows.budget_ledger (`_shortfall`), as in tests/workflow/test_agent_budget.py.
AGENT_CAP = (
    "the agent's monthly budget of $0.50 for 2025-01 has $0.0003 left ($0.49 spent, "
    "$0.0097 held by calls in flight); the call needs at least $0.00042"
)
CHANNEL_CAP = (
    "the monthly budget of channel slack:C1 of $0.15 for 2025-01 has $0.00 left ($0.15 spent, "
    "$0.00 held by calls in flight); the call needs at least $0.00042"
)


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (0.0, "$0.00"),
        (0.5, "$0.50"),
        (12.0, "$12.00"),
        (0.51234, "$0.5123"),
        (0.00042, "$0.00042"),
        (0.0000123, "$0.000012"),
        (0.0006, "$0.0006"),
        (1234.5, "$1,234.50"),
    ],
)
def test_small_amounts_keep_their_significant_digits(amount: float, text: str) -> None:
    assert budget.usd(amount) == text


def test_a_tiny_per_task_spend_is_not_printed_as_zero() -> None:
    ceilings = budget.Ceilings(10, 10_000, 0.0004, 600, 1000)
    hit = budget.check_ceilings(ceilings, BudgetUsage(iterations=1, cost_usd=0.00042), 0)
    assert hit is not None and hit.ceiling == "usd" and hit.resumable
    assert hit.reason == "spent $0.00042 of its $0.0004 per-task budget"
    assert "$0.0000" not in hit.reason


def test_a_monthly_cap_stop_says_it_cannot_be_resumed_and_what_helps() -> None:
    line = status_line(TaskStatus.BUDGET_EXHAUSTED, AGENT_CAP)
    assert line.startswith("Stopped: the agent's monthly budget — the agent's monthly budget of $0.50")
    assert "Paused" not in line and "openloop extend" not in line
    assert "cannot be resumed" in line
    assert "spec.budget.monthly_usd" in line and "openloop agents apply" in line
    assert "next month" in line
    assert "per_channel_monthly_usd" not in line

    channel = status_line(TaskStatus.BUDGET_EXHAUSTED, CHANNEL_CAP)
    assert channel.startswith("Stopped: the channel's monthly budget")
    assert "spec.budget.per_channel_monthly_usd" in channel and "openloop extend" not in channel

    both = budget_stop(f"{AGENT_CAP}; {CHANNEL_CAP}")
    assert both[0] == "the agent's and the channel's monthly budgets"
    assert "spec.budget.monthly_usd and spec.budget.per_channel_monthly_usd" in both[1]


@pytest.mark.parametrize(
    ("usage", "elapsed", "which", "resumes", "field"),
    [
        (BudgetUsage(), 700, "the task's wall-clock limit", False, "spec.limits.wall_clock"),
        (BudgetUsage(iterations=10), 0, "the task's iteration limit", True, "spec.limits.max_iterations"),
        (BudgetUsage(prompt_tokens=995), 0, "the task's token limit", True, "spec.limits.token_limit"),
        (BudgetUsage(cost_usd=0.6), 0, "the task's USD limit", True, "spec.budget.per_task_usd"),
    ],
)
def test_each_per_task_ceiling_names_itself_and_its_setting(
    usage: BudgetUsage, elapsed: float, which: str, resumes: bool, field: str
) -> None:
    hit = budget.check_ceilings(budget.Ceilings(10, 1000, 0.5, 600, 100), usage, elapsed)
    assert hit is not None and hit.resumable is resumes
    line = status_line(TaskStatus.BUDGET_EXHAUSTED, hit.reason)
    assert line.startswith(("Budget reached: " if resumes else "Stopped: ") + which)
    assert field in line and field in hit.next_action
    assert "Paused" not in line
    if resumes:
        assert "openloop extend TASK_ID" in hit.next_action
    else:
        assert "cannot be resumed" in line and "openloop extend" not in hit.next_action


def test_the_model_activitys_own_refusals_are_named() -> None:
    per_task = status_line(
        TaskStatus.BUDGET_EXHAUSTED, "the budget left cannot cover a call to openai/gpt-4o"
    )
    assert per_task.startswith("Budget reached: the task's USD limit")
    unpriced = status_line(
        TaskStatus.BUDGET_EXHAUSTED,
        "no price is known for x/y, so its cost cannot be bounded; name a priced model in "
        "spec.model_policy or set spec.budget.on_exceeded: warn",
    )
    assert unpriced.startswith("Stopped: a model without a price") and "cannot be resumed" in unpriced


def test_the_generic_next_action_separates_per_task_limits_from_monthly_caps() -> None:
    text = next_action(TaskStatus.BUDGET_EXHAUSTED, "task-7")
    assert "openloop extend task-7 --usd 0.50" in text
    assert "spec.budget.monthly_usd" in text and "per_channel_monthly_usd" in text
    assert "next month" in text
