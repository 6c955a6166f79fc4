"""`openloop.approval.prepare`: what an approval request needs before anyone sees it.

Run by the task just before it posts a request, so what it decides is recorded once in the
history and the workflow stays deterministic:

- who may decide: the listed approvers resolved to user ids (a user group's members and a
  `@handle`'s user read from Slack through `activities.slack.names`, with its short cache).
  The request carries these ids; the task and every surface check a decision against them
  with one rule (`workflows.approval_rule`).
- what finishing the task may cost, from LiteLLM's local cost map for the model that
  answered. The rule, kept simple on purpose: the task is expected to take as many steps
  again as it has taken (at least one, at most the iterations its limit leaves), each like
  the average step so far (prompt and completion tokens from the usage ledger). Before any
  usage is recorded, a step is taken as a full answer of `max_output_tokens`.
"""

from __future__ import annotations

from typing import Any

from psycopg.rows import dict_row
from slack_sdk.errors import SlackApiError
from temporalio import activity

from activities.discord.approvers import is_discord_role, role_members
from activities.discord.client import DiscordNotConfigured
from activities.discord.client import activity_error as discord_error
from activities.linear.approvers import is_linear_email, linear_user
from activities.providers import quiet_litellm
from activities.runtime import runtime
from activities.slack.card_fields import usd_text
from activities.slack.client import activity_error
from activities.slack.names import SlackNames, directory, resolve_approvers
from config.settings import Settings
from workflows.message_types import PrepareApprovalInput, PrepareApprovalResult
from workflows.types import ActivityName

FIRST_STEP_PROMPT_TOKENS = 1000  # a step's prompt before any usage is recorded


def remaining_steps(steps_so_far: int, max_iterations: int) -> int:
    """As many steps again as so far, within the iterations left, and at least one."""
    return max(1, min(max(steps_so_far, 1), max_iterations - steps_so_far))


def step_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for one step of this size at `model`'s prices; None when the cost map has none."""
    import litellm

    quiet_litellm()
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # noqa: BLE001 - LiteLLM raises plain Exception for unmapped models
        return None
    total = float(prompt_cost) + float(completion_cost)
    return total if total > 0 else None


async def _usage_so_far(task_id: str) -> tuple[int, int, int, float]:
    """(model calls, prompt tokens, completion tokens, USD) the ledger holds for the task."""
    pool = await runtime().pool()
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT count(*) AS calls, COALESCE(sum(prompt_tokens), 0) AS prompt,"
            " COALESCE(sum(completion_tokens), 0) AS completion, COALESCE(sum(cost_usd), 0) AS usd"
            " FROM usage_ledger WHERE task_id = %s AND key LIKE 'model:%%'",  # not embeddings
            (task_id,),
        )
        row: dict[str, Any] | None = await cursor.fetchone()
    if row is None:
        return 0, 0, 0, 0.0
    return int(row["calls"]), int(row["prompt"]), int(row["completion"]), float(row["usd"])


async def estimate_finishing(inp: PrepareApprovalInput) -> tuple[float, str]:
    """(estimated USD to finish the task, how it was estimated). Once the task has steps in
    the ledger, a step costs what its steps cost on average there (cached input and reasoning
    priced as the provider billed them), so the card and the ledger agree."""
    if inp.model.startswith("offline/"):
        return 0.0, f"{inp.model} is the offline model: no cost"
    calls, prompt, completion, spent = await _usage_so_far(inp.task_id)
    if calls:
        per_prompt, per_completion = prompt // calls, completion // calls
    else:
        per_prompt, per_completion = FIRST_STEP_PROMPT_TOKENS, inp.max_output_tokens
    steps = remaining_steps(max(inp.steps_so_far, calls), inp.max_iterations)
    plural = "s" if steps > 1 else ""
    if calls and spent > 0:
        per_step = spent / calls
        return per_step * steps, (
            f"{steps} more step{plural} at the {usd_text(per_step)} a step of this task so far "
            f"(about {per_prompt}+{per_completion} tokens, cached input and reasoning billed at "
            f"{inp.model}'s prices)"
        )
    list_priced = step_cost(inp.model, per_prompt, max(per_completion, 1))
    if list_priced is None:
        return 0.0, f"no price for {inp.model} in LiteLLM's cost map"
    return list_priced * steps, (
        f"{steps} more step{plural} of about {per_prompt}+{per_completion} tokens at {inp.model}'s prices"
    )


@activity.defn(name=ActivityName.PREPARE_APPROVAL)
async def prepare_approval(inp: PrepareApprovalInput) -> PrepareApprovalResult:
    settings = runtime().settings
    names: SlackNames | None = directory(settings) if settings.slack_bot_token is not None else None
    user_ids: list[str] = []
    unresolved: list[str] = []
    for entry in inp.approvers:  # in the order listed; each surface resolves its own entries
        if is_discord_role(entry):
            found = await _discord_role(settings, entry)
        elif is_linear_email(entry):
            found = await linear_user(settings, entry)
        else:
            try:
                resolved = await resolve_approvers([entry], names)
            except SlackApiError as exc:
                raise activity_error(exc, "reading the approvers' user groups") from None
            found = resolved.user_ids
        user_ids += found
        unresolved += [] if found else [entry]
    if unresolved:
        activity.logger.warning(
            "approvers of %s that stand for nobody now: %s", inp.task_id, ", ".join(unresolved)
        )
    usd, note = await estimate_finishing(inp)
    return PrepareApprovalResult(list(dict.fromkeys(user_ids)), usd, note)


async def _discord_role(settings: Settings, entry: str) -> list[str]:
    try:
        return await role_members(settings, entry)
    except DiscordNotConfigured:
        return []  # reported with the other entries that stand for nobody
    except Exception as exc:
        raise discord_error(exc, "reading the approvers' Discord role") from None
