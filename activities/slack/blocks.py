"""Pure builders for what OpenLoop shows in Slack (used by the Slack activities and the
Slack surface alike): Block Kit approval messages, the texts of
short replies, markdown -> Slack mrkdwn, and splitting long replies to Slack's limits.

No I/O lives here, so every message can be tested without Slack. Blocks are built with
slack-sdk's Block Kit models, which check Slack's field limits when serialised.
"""

from __future__ import annotations

import json
import re
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

from workflows.types import ApprovalRequest, TaskStatus

APPROVE_ACTION = "openloop_approve"
DENY_ACTION = "openloop_deny"
APPROVAL_ACTIONS = (APPROVE_ACTION, DENY_ACTION)

# Slack truncates `text` past 40,000 characters and advises staying under 4,000 per message.
MESSAGE_LIMIT = 3900
SECTION_LIMIT = 3000  # a section block's text
MAX_ARGUMENT_SECTIONS = 30  # a message holds at most 50 blocks

_USER_ID = re.compile(r"^[UW][A-Z0-9_]{2,}$")  # Slack user ids (underscores allowed)
_SLACK_TOKEN = re.compile(r"<(?:[@#!]|https?://|mailto:)[^<>\s]*(?:\|[^<>]*)?>")
_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?!\[[ xX]\])")
_TASK_BOX = re.compile(r"^(\s*)[-*+]\s+\[([ xX])\]\s+")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^(\s*)>\s?")
_FENCE = re.compile(r"^\s*(```|~~~)")
_BOLD_MARK = "\x01"


def escape(text: str) -> str:
    """Slack's three control characters, escaped as its docs require."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mention(user: str) -> str:
    return f"<@{user}>" if _USER_ID.match(user) else f"`{escape(user)}`"


def slack_date(iso: str) -> str:
    """A timestamp each reader sees in their own time zone, with the ISO text as fallback."""
    try:
        epoch = int(datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return escape(iso)
    return f"<!date^{epoch}^{{date_short_pretty}} at {{time}}|{escape(iso)}>"


# Markdown -> mrkdwn ----------------------------------------------------------------------


def _inline(text: str) -> str:
    """Convert one run of markdown text outside code spans."""
    kept: list[str] = []

    def keep(value: str) -> str:
        kept.append(value)
        return f"\x02{len(kept) - 1}\x03"

    text = _SLACK_TOKEN.sub(lambda m: keep(m.group(0)), text)
    text = _LINK.sub(lambda m: keep(f"<{m.group(2)}|{escape(m.group(1)) or m.group(2)}>"), text)
    text = escape(text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC_STAR.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace(_BOLD_MARK, "*")
    return re.sub("\x02(\\d+)\x03", lambda m: kept[int(m.group(1))], text)


def _line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"*{_inline(heading.group(1)).replace('*', '')}*"
    if _RULE.match(line):
        return "──────────"
    prefix = ""
    quote = _QUOTE.match(line)
    if quote:
        prefix, line = quote.group(1) + ">", line[quote.end() :]
        prefix += " "
    box = _TASK_BOX.match(line)
    if box:
        line = f"{box.group(1)}{'☑' if box.group(2) in 'xX' else '☐'} {line[box.end() :]}"
    else:
        line = _BULLET.sub(lambda m: f"{m.group(1)}• ", line)
    parts = _CODE_SPAN.split(line)
    # split() yields [text, ticks, code, text, ticks, code, ...]
    out: list[str] = []
    for index in range(0, len(parts), 3):
        out.append(_inline(parts[index]))
        if index + 2 < len(parts):
            out.append(f"`{escape(parts[index + 2])}`")
    return prefix + "".join(out)


def markdown_to_mrkdwn(markdown: str) -> str:
    """Common markdown (what models write) as Slack mrkdwn; code blocks are kept verbatim."""
    lines: list[str] = []
    in_fence = False
    for line in markdown.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            # Slack shows a language tag after ``` literally, so it is dropped.
            lines.append("```")
            in_fence = not in_fence
        elif in_fence:
            lines.append(escape(line))
        else:
            lines.append(_line(line))
    if in_fence:
        lines.append("```")
    return "\n".join(lines)


# Splitting -------------------------------------------------------------------------------


def _hard_split(line: str, limit: int) -> list[str]:
    pieces: list[str] = []
    while len(line) > limit:
        cut = line.rfind(" ", limit // 2, limit)
        cut = limit if cut <= 0 else cut
        pieces.append(line[:cut])
        line = line[cut:].lstrip(" ")
    return [*pieces, line]


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Split mrkdwn into messages of at most `limit` characters, at line breaks when possible.

    A code block cut in two is closed at the end of one part and reopened in the next, so
    every part renders on its own.
    """
    if len(text) <= limit:
        return [text]
    budget = limit - 4  # room to close a code block
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    in_fence = False
    for raw in text.split("\n"):
        for line in _hard_split(raw, budget - 4):
            if current and size + len(line) + 1 > budget:
                chunks.append("\n".join(current) + ("\n```" if in_fence else ""))
                current, size = (["```"], 4) if in_fence else ([], 0)
            current.append(line)
            size += len(line) + 1
            if line.strip().startswith("```"):
                in_fence = not in_fence
    if current:
        chunks.append("\n".join(current))
    return [chunk for chunk in chunks if chunk.strip()]


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
    sections: list[Block] = [SectionBlock(text=MarkdownTextObject(text="*Arguments*"))]
    shown = pieces[:MAX_ARGUMENT_SECTIONS]
    sections += [SectionBlock(text=MarkdownTextObject(text=piece)) for piece in shown]
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
    approvers = ", ".join(mention(a) for a in request.approvers) or "nobody"
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
                MarkdownTextObject(text=f"*Estimated cost*\n${request.estimated_cost_usd:.4f}"),
                MarkdownTextObject(text=f"*Who may approve*\n{approvers}"),
                MarkdownTextObject(text=f"*Expires*\n{slack_date(request.expires_at_iso)}"),
            ]
        ),
    ]


def approval_request_message(
    task_id: str, agent_name: str, request: ApprovalRequest
) -> tuple[str, list[dict[str, object]]]:
    """(fallback text, blocks) for a gated action waiting for a decision."""
    value = approval_button_value(task_id, request)
    blocks: list[Block] = [
        HeaderBlock(text=f"Approval needed: {request.tool}"[:150]),
        *_details(task_id, agent_name, request),
        ActionsBlock(
            block_id=f"approval:{request.request_id}"[:255],
            elements=[
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
            ],
        ),
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
    text = f"{request.tool} {outcome}" + (f" by {decided_by}" if decided_by else "")
    return escape(text), [block.to_dict() for block in blocks]


# Short texts -----------------------------------------------------------------------------


def progress_text(task_id: str, status: TaskStatus | None = None, note: str = "") -> str:
    """The one progress message a task keeps in its thread, edited in place."""
    labels = {
        None: "⏳ Working on it…",
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
        f"`{channel}` in an agent's `spec.surfaces.slack.channels` and run `openloop apply -f "
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


def busy_text() -> str:
    return "I couldn't pass that on just now; please try again in a minute."
