"""Why a task stopped and what to do next: one place for every stop reason's wording."""

from __future__ import annotations

from workflows.types import ModelCallResult, TaskStatus

NEXT_ACTION: dict[TaskStatus, str] = {
    TaskStatus.SUCCESS: "Nothing to do; follow up in the same thread to continue.",
    TaskStatus.BUDGET_EXHAUSTED: "The reason says which budget stopped the task. A per-task "
    "limit (USD, tokens, iterations) is extended while the task waits: "
    "`openloop extend TASK_ID --usd 0.50` (or `--tokens N`, `--iterations N`). A monthly cap "
    "cannot be extended per task: raise spec.budget.monthly_usd (the agent's) or "
    "spec.budget.per_channel_monthly_usd (a channel's) and re-apply the agent "
    "(`openloop agents apply -f FILE`), or wait for the next month (UTC), then ask again. "
    "The wall clock: raise spec.limits.wall_clock or split the request.",
    TaskStatus.NO_PROGRESS: "The agent repeated the same action with the same result; "
    "rephrase the request or check the tool it was calling.",
    TaskStatus.APPROVAL_DENIED: "The action was denied; ask again with a different request "
    "if it is still needed.",
    TaskStatus.APPROVAL_EXPIRED: "Nobody decided in time and nothing was executed; ask again "
    "and ping an approver.",
    TaskStatus.CANCELLED: "Nothing to do; start a new task if it is still needed.",
    TaskStatus.ERROR: "Check `openloop explain TASK_ID` for the failing step; fix the "
    "configuration or provider access and ask again.",
}

_REAPPLY = "re-apply the agent (`openloop agents apply -f FILE`)"
_MONTHLY = (
    "It cannot be resumed: a per-task extension cannot lift a monthly cap. Raise {fields} "
    "and {reapply}, or wait for the next month (UTC), then ask again."
)


# Where the wording depends on where the task was asked ("the same thread" is Slack's).
NEXT_ACTION_ON: dict[str, dict[TaskStatus, str]] = {
    "cli": {
        TaskStatus.SUCCESS: 'Nothing to do; for a follow-up, ask again (`openloop ask AGENT "..."`).',
    },
    "github": {
        TaskStatus.SUCCESS: "Nothing to do; mention the agent in a new comment to follow up.",
    },
}


def next_action(status: TaskStatus, task_id: str, *, surface: str = "") -> str:
    """What to do after a stop; `surface` (cli, slack, github) picks its own wording where
    it differs. Without it, the wording the workflow has always recorded."""
    text = NEXT_ACTION_ON.get(surface, {}).get(status) or NEXT_ACTION.get(status, "")
    return text.replace("TASK_ID", task_id)


def budget_stop(reason: str) -> tuple[str, str]:
    """Which budget a BUDGET_EXHAUSTED reason names, and what helps (and whether it resumes).

    Reads the reasons `workflows.budget.check_ceilings` writes and the model activity's
    refusals (`activities.llm.model_activities`, whose monthly-cap texts come from
    `workflows.budget_ledger`). A refusal may name both monthly caps.
    """
    text = reason.lower()
    agent_cap = "the agent's monthly budget" in text
    channel_cap = "monthly budget of channel" in text
    if agent_cap or channel_cap:
        fields = " and ".join(
            name
            for name, hit in (
                ("spec.budget.monthly_usd", agent_cap),
                ("spec.budget.per_channel_monthly_usd", channel_cap),
            )
            if hit
        )
        which = {
            (True, False): "the agent's monthly budget",
            (False, True): "the channel's monthly budget",
            (True, True): "the agent's and the channel's monthly budgets",
        }[(agent_cap, channel_cap)]
        return which, _MONTHLY.format(fields=fields, reapply=_REAPPLY)
    if "wall-clock" in text:
        return "the task's wall-clock limit", (
            f"It cannot be resumed: raise spec.limits.wall_clock and {_REAPPLY}, or split the "
            "request into smaller tasks, then ask again."
        )
    if "no price is known" in text:
        return "a model without a price", (
            f"It cannot be resumed: make the change the reason names, {_REAPPLY} and ask again."
        )
    if "per-task budget" in text or "budget left cannot cover" in text:
        return "the task's USD limit", "spec.budget.per_task_usd sets it (per task)."
    if "iterations" in text:
        return "the task's iteration limit", "spec.limits.max_iterations sets it (per task)."
    if "tokens" in text:
        return "the task's token limit", "spec.limits.token_limit sets it (per task)."
    return "a budget", ""


def status_line(status: TaskStatus, reason: str) -> str:
    """A short line for the thread when a task stops for any reason but success."""
    if status == TaskStatus.BUDGET_EXHAUSTED:
        which, helps = budget_stop(reason)
        label = "Stopped" if helps.startswith("It cannot be resumed") else "Budget reached"
        return f"{label}: {which} — {reason}. {helps}".rstrip()
    labels = {
        TaskStatus.NO_PROGRESS: "Stopped: no progress",
        TaskStatus.APPROVAL_DENIED: "Stopped: approval denied",
        TaskStatus.APPROVAL_EXPIRED: "Stopped: approval expired",
        TaskStatus.CANCELLED: "Cancelled",
        TaskStatus.ERROR: "Stopped: error",
    }
    return f"{labels.get(status, status.value)} — {reason}"


def final_text(parts: list[str], status: TaskStatus, reason: str) -> str:
    """What the thread gets at the end: the non-empty parts, then how it stopped if not SUCCESS."""
    text = "\n\n".join(part for part in parts if part)
    if status == TaskStatus.SUCCESS:
        return text
    return (text + "\n\n" if text else "") + status_line(status, reason)


# A model's turn that ended with neither text nor a tool call (`ModelCallResult.finish_reason`).
NO_ANSWER = frozenset({"refused", "empty"})


def no_answer_reason(result: ModelCallResult) -> str:
    """Why a task stopped on an answer with nothing in it, in the provider's own terms."""
    said = f" (finish reason {result.provider_finish!r})" if result.provider_finish else ""
    if result.finish_reason == "refused":
        refusal = f": {result.refusal.strip()[:300]}" if result.refusal.strip() else ""
        return (
            f"{result.usage.model} refused to answer{said}{refusal}; rephrase the request, or route "
            "such tasks to another model in spec.model_policy"
        )
    return (
        f"{result.usage.model} ended its turn with no answer and no tool call{said}; ask again, "
        "or route such tasks to another model in spec.model_policy"
    )
