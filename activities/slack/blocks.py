"""Pure builders for what OpenLoop shows in Slack (used by the Slack activities and the
Slack surface alike): Block Kit approval messages and the texts of short replies.

No I/O lives here, so every message can be tested without Slack. Blocks are built with
slack-sdk's Block Kit models, which check Slack's field limits when serialised. Markdown ->
mrkdwn and splitting long replies live in `activities.slack.mrkdwn`; their names are
importable from here too, as callers use them (`blocks.split_message`). A draft pull
request's card is laid out by `activities.slack.pull_request_blocks`.
"""

from __future__ import annotations

import json
from datetime import datetime

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    SectionBlock,
)

from activities.slack import pull_request_blocks
from activities.slack.card_fields import FOLD_ARGUMENTS_CHARS, approvers_text, cost_text, mention, usd_text
from activities.slack.mrkdwn import MESSAGE_LIMIT, escape, markdown_to_mrkdwn, split_message
from activities.slack.pull_request_blocks import SHOW_DIFF_ACTION
from workflows.pull_request_card import PullRequestCard
from workflows.types import ApprovalRequest, TaskStatus

__all__ = [
    "APPROVAL_ACTIONS",
    "APPROVE_ACTION",
    "DENY_ACTION",
    "MAX_ARGUMENT_SECTIONS",
    "MESSAGE_LIMIT",
    "OUTCOME_LABELS",
    "SECTION_LIMIT",
    "SHOW_DIFF_ACTION",
    "approval_button_value",
    "approval_request_message",
    "approval_resolved_message",
    "escape",
    "markdown_to_mrkdwn",
    "mention",
    "no_agent_text",
    "not_allowed_to_approve_text",
    "not_allowed_to_trigger_text",
    "parse_button_value",
    "progress_text",
    "request_closed_text",
    "slack_date",
    "split_message",
    "usd_text",
]

APPROVE_ACTION = "openloop_approve"
DENY_ACTION = "openloop_deny"
APPROVAL_ACTIONS = (APPROVE_ACTION, DENY_ACTION)

SECTION_LIMIT = 3000  # a section block's text
MAX_ARGUMENT_SECTIONS = 30  # a message holds at most 50 blocks


def slack_date(iso: str) -> str:
    """A timestamp each reader sees in their own time zone, with the ISO text as fallback."""
    try:
        epoch = int(datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return escape(iso)
    return f"<!date^{epoch}^{{date_short_pretty}} at {{time}}|{escape(iso)}>"


# Approval messages -----------------------------------------------------------------------


def approval_button_value(task_id: str, request: ApprovalRequest) -> str:
    """What a click sends back: the task and the exact request and action it decides."""
    return json.dumps(
        {"task_id": task_id, "request_id": request.request_id, "action_id": request.action_id},
        separators=(",", ":"),
    )


def parse_button_value(value: str) -> tuple[str, str, str] | None:
    try:
        data = json.loads(value)
        parsed = (data["task_id"], data["request_id"], data["action_id"])
    except (ValueError, KeyError, TypeError):
        return None
    if not all(isinstance(item, str) and item for item in parsed):
        return None
    return parsed


def _argument_sections(arguments: dict[str, object]) -> list[Block]:
    exact = escape(json.dumps(arguments, indent=2, sort_keys=True, ensure_ascii=False))
    pieces = split_message(f"```\n{exact}\n```", SECTION_LIMIT - 20)
    folded = len(exact) > FOLD_ARGUMENTS_CHARS
    title = "*Arguments* (long: folded, “see more” shows them whole)" if folded else "*Arguments*"
    sections: list[Block] = [SectionBlock(text=MarkdownTextObject(text=title))]
    shown = pieces[:MAX_ARGUMENT_SECTIONS]
    sections += [
        SectionBlock(text=MarkdownTextObject(text=piece), expand=False if folded else None) for piece in shown
    ]
    if len(pieces) > MAX_ARGUMENT_SECTIONS:
        sections.append(
            SectionBlock(
                text=MarkdownTextObject(
                    text="_The arguments are too long to show in full here; see the task in the CLI._"
                )
            )
        )
    return sections


def _details(task_id: str, agent_name: str, request: ApprovalRequest) -> list[Block]:
    approvers = approvers_text(request)
    who_and_when = [
        MarkdownTextObject(text=f"*Who may approve*\n{approvers}"),
        MarkdownTextObject(text=f"*Expires*\n{slack_date(request.expires_at_iso)}"),
    ]
    card = PullRequestCard.of(request)
    if card is not None:
        return [
            *pull_request_blocks.summary_blocks(task_id, agent_name, card),
            SectionBlock(fields=who_and_when),
        ]
    return [
        SectionBlock(
            text=MarkdownTextObject(
                text=f"*{escape(agent_name)}* wants to run `{escape(request.tool)}` "
                f"(task `{escape(task_id)}`)."
            )
        ),
        *_argument_sections(request.arguments),
        SectionBlock(
            fields=[
                MarkdownTextObject(text=f"*Model*\n`{escape(request.model)}`"),
                MarkdownTextObject(text=f"*Estimated cost*\n{cost_text(request)}"),
                *who_and_when,
            ]
        ),
    ]


def approval_request_message(
    task_id: str, agent_name: str, request: ApprovalRequest
) -> tuple[str, list[dict[str, object]]]:
    """(fallback text, blocks) for a gated action waiting for a decision."""
    value = approval_button_value(task_id, request)
    card = PullRequestCard.of(request)
    buttons = [
        ButtonElement(text="Approve", action_id=APPROVE_ACTION, value=value, style="primary"),
        ButtonElement(
            text="Deny",
            action_id=DENY_ACTION,
            value=value,
            style="danger",
            confirm=ConfirmObject(
                title="Deny this action?",
                text=f"The agent will not run `{request.tool}`.",
                confirm="Deny",
                deny="Cancel",
            ),
        ),
    ]
    if card is not None:
        buttons.append(pull_request_blocks.show_diff_button(value))
    blocks: list[Block] = [
        HeaderBlock(text=f"Approval needed: {request.tool}"[:150]),
        *_details(task_id, agent_name, request),
        *([pull_request_blocks.full_diff_note(card, with_button=True)] if card is not None else []),
        ActionsBlock(block_id=f"approval:{request.request_id}"[:255], elements=buttons),
        ContextBlock(
            elements=[
                MarkdownTextObject(
                    text=f"Request `{escape(request.request_id)}` · only the listed approvers can decide",
                )
            ]
        ),
    ]
    text = f"Approval needed: {agent_name} wants to run {request.tool} (task {task_id})"
    return escape(text), [block.to_dict() for block in blocks]


OUTCOME_LABELS = {
    "approved": "✅ Approved",
    "denied": "⛔ Denied",
    "expired": "⌛ Expired — nobody decided in time; nothing was run",
    "cancelled": "🚫 Cancelled — the task stopped; nothing was run",
}


def approval_resolved_message(
    task_id: str,
    agent_name: str,
    request: ApprovalRequest,
    outcome: str,
    decided_by: str | None,
    decided_at_iso: str,
) -> tuple[str, list[dict[str, object]]]:
    """The same message once decided: who decided and when, and no buttons."""
    label = OUTCOME_LABELS.get(outcome, escape(outcome))
    who = f" by {mention(decided_by)}" if decided_by else ""
    line = f"*{label}*{who} · {slack_date(decided_at_iso)}"
    blocks: list[Block] = [
        HeaderBlock(text=f"{request.tool}: {outcome}"[:150]),
        SectionBlock(text=MarkdownTextObject(text=line)),
        *_details(task_id, agent_name, request),
    ]
    card = PullRequestCard.of(request)
    if card is not None:
        blocks.append(pull_request_blocks.full_diff_note(card, with_button=False))
    text = f"{request.tool} {outcome}" + (f" by {decided_by}" if decided_by else "")
    return escape(text), [block.to_dict() for block in blocks]


# Short texts -----------------------------------------------------------------------------


def progress_text(task_id: str, status: TaskStatus | None = None, note: str = "") -> str:
    """The one progress message a task keeps in its thread, edited in place."""
    labels = {
        None: "⏳ Working on it…",
        TaskStatus.QUEUED: "⏸ Queued: waiting for a slot",
        TaskStatus.RUNNING: "⏳ Working on it…",
        TaskStatus.WAITING_USER: "💬 Waiting for your answer in this thread",
        TaskStatus.WAITING_APPROVAL: "✋ Waiting for approval",
        TaskStatus.WAITING_BUDGET: "⏸ Paused: budget exhausted",
        TaskStatus.BUDGET_EXHAUSTED: "⏸ Paused: budget exhausted",
        TaskStatus.SUCCESS: "✅ Done",
    }
    if status in labels:
        label = labels[status]
    else:
        assert status is not None
        label = f"⛔ Stopped: {status.value.lower().replace('_', ' ')}"
    extra = f" — {markdown_to_mrkdwn(note)}" if note else ""
    return f"{label}{extra}\n_task `{escape(task_id)}`_"


def no_agent_text(channel: str) -> str:
    return (
        f"No agent is set up for <#{channel}> yet, so I can't take this on. To add one, put "
        f"`{channel}` in an agent's `spec.surfaces.slack.channels` and run `openloop agents apply -f "
        "agent.yaml`."
    )


def not_allowed_to_trigger_text(agent_name: str) -> str:
    return (
        f"You're not on the list of people who can ask *{escape(agent_name)}* for work here "
        "(`spec.surfaces.slack.triggers`). Ask a channel admin to add you."
    )


def not_allowed_to_approve_text(approvers: list[str]) -> str:
    names = ", ".join(mention(a) for a in approvers) or "nobody"
    return f"You're not allowed to decide this request; only {names} can. Nothing was changed."


def request_closed_text(reason: str) -> str:
    return f"This approval request {reason}; nothing was changed."
