"""Reserve, settle and release against an agent's budget workflow, from inside an activity.

Every call is an update-with-start: the first reservation of an agent starts its
`openloop.AgentBudget` workflow, later ones (from any worker, concurrently) reach the same
one (id conflict policy USE_EXISTING). Update ids are derived from the reservation key, so a
repeated call within a run is answered by the server from the first call's result.

Also the pure arithmetic the model activity needs: a call's worst-case cost (with 16 output
tokens it is also the smallest useful reservation) and the `max_tokens` that fits a grant.
"""

from __future__ import annotations

import math

from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy

from workflows.agent_budget import AgentBudgetWorkflow
from workflows.budget_types import (
    EPSILON_USD,
    BudgetInput,
    ReleaseRequest,
    ReserveRequest,
    ReserveResult,
    SettleRequest,
    budget_workflow_id,
)

__all__ = [
    "affordable_max_tokens",
    "release_budget",
    "reservation_key",
    "reserve_budget",
    "settle_budget",
    "worst_case_usd",
]


def reservation_key(task_id: str, step: int, attempt: int, model: str) -> str:
    """One reservation per model call attempt: a retried attempt never reuses a released hold."""
    return f"{task_id}:{step}:{attempt}:{model}"


def worst_case_usd(prompt_tokens: int, max_tokens: int, prices: tuple[float, float]) -> float:
    """The most a call can cost: its prompt at the input price, max_tokens at the output price."""
    return prompt_tokens * prices[0] + max_tokens * prices[1]


def affordable_max_tokens(
    granted_usd: float, prompt_tokens: int, prices: tuple[float, float], max_tokens: int
) -> int:
    """The largest max_tokens (at most `max_tokens`) whose worst case fits `granted_usd`."""
    input_price, output_price = prices
    if output_price <= 0:
        return max_tokens
    left = granted_usd - prompt_tokens * input_price
    # Round near-integers up (0.063 fits 3999.9999… tokens, i.e. 4000), then step back one
    # if that overshoots the grant by more than float noise.
    tokens = math.floor(left / output_price + 1e-6)
    if worst_case_usd(prompt_tokens, tokens, prices) > granted_usd + EPSILON_USD:
        tokens -= 1
    return max(0, min(max_tokens, tokens))


def _start(
    task_queue: str, workspace: str, agent: str
) -> WithStartWorkflowOperation[AgentBudgetWorkflow, None]:
    return WithStartWorkflowOperation(
        AgentBudgetWorkflow.run,
        BudgetInput(workspace=workspace, agent=agent),
        id=budget_workflow_id(workspace, agent),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


async def reserve_budget(
    client: Client,
    task_queue: str,
    workspace: str,
    agent: str,
    key: str,
    channel: str,
    amount_usd: float,
    minimum_usd: float,
    monthly_usd: float | None,
    channel_monthly_usd: float | None,
    on_exceeded: str,
) -> ReserveResult:
    """Hold up to `amount_usd` for the call `key`; the result says how much was granted."""
    request = ReserveRequest(
        key=key,
        channel=channel,
        amount_usd=amount_usd,
        minimum_usd=minimum_usd,
        monthly_usd=monthly_usd,
        channel_monthly_usd=channel_monthly_usd,
        on_exceeded=on_exceeded,
    )
    result: ReserveResult = await client.execute_update_with_start_workflow(
        AgentBudgetWorkflow.reserve,
        request,
        start_workflow_operation=_start(task_queue, workspace, agent),
        id=f"reserve:{key}",
    )
    return result


async def settle_budget(
    client: Client, task_queue: str, workspace: str, agent: str, key: str, channel: str, cost_usd: float
) -> None:
    """Charge the call's actual cost to the period it reserved in and free the rest of its hold."""
    await client.execute_update_with_start_workflow(
        AgentBudgetWorkflow.settle,
        SettleRequest(key=key, cost_usd=cost_usd, channel=channel),
        start_workflow_operation=_start(task_queue, workspace, agent),
        id=f"settle:{key}",
    )


async def release_budget(client: Client, task_queue: str, workspace: str, agent: str, key: str) -> None:
    """Free the hold of a call that failed; releasing twice, or after a settle, changes nothing."""
    await client.execute_update_with_start_workflow(
        AgentBudgetWorkflow.release,
        ReleaseRequest(key=key),
        start_workflow_operation=_start(task_queue, workspace, agent),
        id=f"release:{key}",
    )
