"""The Slack card of a draft pull request waiting for approval: what a reviewer needs to
decide, instead of the request's raw arguments. The title and body, the repository and base,
the diff's stat, the tests before and after, model and cost so far, what the sandbox's network
allowlist refused its commands (only when it refused something), the start of the patch
(preformatted, so nothing in it is read as mrkdwn) and how to see all of it: a "Show diff"
button that posts the stored diff as a snippet in the thread, and the CLI command.

Pure builders, used by `activities.slack.blocks` for this one tool; every other tool's card
is unchanged.
"""

from __future__ import annotations

from slack_sdk.models.blocks import (
    Block,
    ButtonElement,
    ContextBlock,
    MarkdownTextObject,
    RichTextBlock,
    RichTextElementParts,
    RichTextPreformattedElement,
    SectionBlock,
)

from activities.slack.mrkdwn import escape, markdown_to_mrkdwn
from workflows.pull_request_card import PullRequestCard

SHOW_DIFF_ACTION = "openloop_show_diff"
FIELD_LIMIT = 2000  # a section field's text


def _field(label: str, value: str) -> MarkdownTextObject:
    return MarkdownTextObject(text=f"*{label}*\n{value}"[:FIELD_LIMIT])


def summary_blocks(task_id: str, agent_name: str, card: PullRequestCard) -> list[Block]:
    """What will be proposed and how it was checked; the approvers and expiry follow."""
    what = f"*{escape(card.title) or '(no title)'}*"
    body = card.short_body()
    if body:
        what += "\n" + markdown_to_mrkdwn(body)
    blocks: list[Block] = [
        SectionBlock(
            text=MarkdownTextObject(
                text=f"*{escape(agent_name)}* wants to open a draft pull request "
                f"(`github.create_pull_request`, task `{escape(task_id)}`)."
            )
        ),
        SectionBlock(text=MarkdownTextObject(text=what[:2900])),
        SectionBlock(
            fields=[
                _field("Repository", f"`{escape(card.repo)}` → `{escape(card.base)}`"),
                _field("Diff", f"{escape(card.diff)}\n`{escape(card.short_sha)}`"),
                _field("Tests before", escape(card.tests_before)),
                _field("Tests after", escape(card.tests_after)),
                _field("Model", f"`{escape(card.model)}`"),
                _field("Cost so far", card.cost),
            ]
        ),
    ]
    if blocked := card.shown_blocked():
        listed = "\n".join(f"• {escape(line)}" for line in blocked)
        said = f"*The sandbox's network allowlist refused*\n{listed}"
        blocks.append(SectionBlock(text=MarkdownTextObject(text=said[:2900])))
    preview = card.shown_preview()
    if preview:
        blocks.append(
            RichTextBlock(
                elements=[RichTextPreformattedElement(elements=[RichTextElementParts.Text(text=preview)])]
            )
        )
    return blocks


def full_diff_note(card: PullRequestCard, with_button: bool) -> ContextBlock:
    where = "*Show diff* posts all of it in the thread; " if with_button else ""
    command = f"`{escape(card.full_diff)}`" if card.full_diff else "the task's CLI"
    return ContextBlock(
        elements=[MarkdownTextObject(text=f"This is the start of the patch. {where}in a terminal: {command}")]
    )


def show_diff_button(value: str) -> ButtonElement:
    """Posts the stored diff the request is for (the click carries the task and request)."""
    return ButtonElement(text="Show diff", action_id=SHOW_DIFF_ACTION, value=value)


def diff_posted_text(task_id: str, card_ts: str | None = None) -> str:
    return f"The diff of task `{escape(task_id)}` waiting for approval" + (" above." if card_ts else ".")
