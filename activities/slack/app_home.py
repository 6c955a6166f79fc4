"""The App Home tab: what a person sees when they open the agent's Home in Slack.

Three parts: their recent tasks (status, agent, channel, cost), the approvals waiting for
them (the same rule as a click decides who that is: `workflows.approval_rule`), and each
channel's spend this month against its budget (from the usage ledger). `home_view` is pure
Block Kit; the reads are in `surfaces.slack.home`, the publishing in
`surfaces.slack.directory_events`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slack_sdk.models.blocks import (
    Block,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    SectionBlock,
)

from activities.slack.blocks import slack_date
from activities.slack.card_fields import usd_text
from activities.slack.mrkdwn import escape

MAX_ROWS = 10  # per part: a home view holds at most 100 blocks
STATUS_ICONS = {
    "QUEUED": "⏸",
    "RUNNING": "⏳",
    "WAITING_APPROVAL": "✋",
    "WAITING_USER": "💬",
    "WAITING_BUDGET": "⏸",
    "SUCCESS": "✅",
    "BUDGET_EXHAUSTED": "⏸",
}


@dataclass(frozen=True)
class HomeTask:
    task_id: str
    agent: str
    channel: str
    status: str
    request: str
    cost_usd: float


@dataclass(frozen=True)
class HomeApproval:
    task_id: str
    agent: str
    channel: str
    tool: str
    expires_at_iso: str
    estimated_cost_usd: float


@dataclass(frozen=True)
class ChannelSpend:
    channel: str
    agent: str
    month_usd: float
    budget_usd: float | None


@dataclass
class Home:
    user: str
    tasks: list[HomeTask] = field(default_factory=list)
    approvals: list[HomeApproval] = field(default_factory=list)
    spend: list[ChannelSpend] = field(default_factory=list)


def _channel(channel: str) -> str:
    return f"<#{channel}>" if channel[:1] in ("C", "G") else f"`{escape(channel)}`"


def _task_line(task: HomeTask) -> str:
    icon = STATUS_ICONS.get(task.status, "⛔")
    status = task.status.lower().replace("_", " ")
    asked = escape(task.request[:80] + ("…" if len(task.request) > 80 else ""))
    return (
        f"{icon} *{escape(task.agent)}* in {_channel(task.channel)}: {asked}\n"
        f"{status} · {usd_text(task.cost_usd)} · `{escape(task.task_id)}`"
    )


def _approval_line(approval: HomeApproval) -> str:
    return (
        f"✋ *{escape(approval.agent)}* wants to run `{escape(approval.tool)}` "
        f"in {_channel(approval.channel)}"
        f"\nestimated {usd_text(approval.estimated_cost_usd)} to finish · expires "
        f"{slack_date(approval.expires_at_iso)} · decide on the card in the thread · "
        f"`{escape(approval.task_id)}`"
    )


def _spend_line(spend: ChannelSpend) -> str:
    budget = f" of {usd_text(spend.budget_usd)}" if spend.budget_usd is not None else " (no monthly budget)"
    return f"{_channel(spend.channel)} · {escape(spend.agent)}: *{usd_text(spend.month_usd)}*{budget}"


def _part(title: str, lines: list[str], empty: str) -> list[Block]:
    blocks: list[Block] = [HeaderBlock(text=title)]
    if not lines:
        return [*blocks, ContextBlock(elements=[MarkdownTextObject(text=empty)])]
    blocks += [SectionBlock(text=MarkdownTextObject(text=line)) for line in lines[:MAX_ROWS]]
    if len(lines) > MAX_ROWS:
        more = f"and {len(lines) - MAX_ROWS} more: `openloop tasks` lists them all"
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=more)]))
    return blocks


def home_view(home: Home) -> dict[str, object]:
    """The Home tab's view for `views.publish`."""
    blocks: list[Block] = [
        *_part(
            "Waiting for your approval",
            [_approval_line(a) for a in home.approvals],
            "Nothing waits for your decision.",
        ),
        DividerBlock(),
        *_part(
            "Your recent tasks",
            [_task_line(t) for t in home.tasks],
            "You have not asked the agent for anything yet: mention it in a channel it serves.",
        ),
        DividerBlock(),
        *_part(
            "Spend this month",
            [_spend_line(s) for s in home.spend],
            "No model spend recorded this month.",
        ),
    ]
    return {"type": "home", "blocks": [block.to_dict() for block in blocks]}
