"""What a Slack thread shows while its task works: the assistant status, step labels, Stop.

In an assistant thread (a DM with the agent, or Slack's assistant container) the task sets
the thread's status with `assistant.threads.setStatus` ("is reading the thread…") and clears
it when it answers. Elsewhere, and wherever the workspace has not enabled Slack's AI-app
features (setStatus answers `not_allowed_token_type`, `missing_scope`,
`feature_not_enabled`, ...), the one progress message is edited instead. A status is
cosmetic: no error here ever fails a task.

The progress message carries a Stop button while the task runs (`STOP_ACTION`, its value the
task id); the Slack surface cancels the task when someone allowed to steer it clicks.
"""

from __future__ import annotations

import logging
import time

from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import (
    ButtonElement,
    ConfirmObject,
    MarkdownTextObject,
    SectionBlock,
)
from slack_sdk.web.async_client import AsyncWebClient

from activities.slack.client import error_code
from workflows.types import SurfaceContext

log = logging.getLogger(__name__)

STOP_ACTION = "openloop_stop"
WORKING_STATUS = "is working on it…"
# How long a workspace that refused the status is not asked again (per process).
UNAVAILABLE_FOR_SECONDS = 600.0

# What each tool step looks like while it runs ("is reading the thread…") and once done.
_STEP_LABELS: dict[str, tuple[str, str]] = {
    "slack.read_thread": ("reading the thread", "Read the thread"),
    "slack.post_message": ("posting in Slack", "Posted in Slack"),
    "memory.search": ("searching memory", "Searched memory"),
    "memory.save": ("saving to memory", "Saved to memory"),
    "github.create_issue": ("opening an issue", "Opened an issue"),
    "github.read_issue": ("reading the issue", "Read the issue"),
    "github.comment": ("commenting on GitHub", "Commented on GitHub"),
}

_refused_until: dict[str, float] = {}  # token digest -> monotonic time to ask again


def tool_of(model_name: str) -> str:
    """The catalog name of a tool as the model calls it (`slack__read_thread`)."""
    return model_name.replace("__", ".")


def doing(tool: str) -> str:
    """What a running step is shown as: "reading the thread"."""
    return _STEP_LABELS.get(tool, (f"running {tool}", ""))[0]


def done(tool: str) -> str:
    """What a finished step is shown as: "Read the thread"."""
    return _STEP_LABELS.get(tool, ("", f"Ran {tool}"))[1]


def waiting_for_approval(approvers: list[str]) -> str:
    names = " or ".join(f"<@{a}>" for a in approvers[:3]) or "an approver"
    return f"waiting for {names}'s approval"


def in_assistant_thread(context: SurfaceContext) -> bool:
    """A DM with the agent (channel ids of DMs start with D): Slack's assistant threads."""
    return context.surface == "slack" and context.channel.startswith("D") and context.thread is not None


def _key(client: AsyncWebClient) -> str:
    return f"{client.base_url}|{hash(client.token)}"


async def set_status(client: AsyncWebClient, context: SurfaceContext, status: str) -> bool:
    """Show `status` in the task's assistant thread ("" clears it). False when it cannot be
    shown there (not an assistant thread, the AI features off, any Slack error): the caller
    falls back to the progress message."""
    if not in_assistant_thread(context) or context.thread is None:
        return False
    key = _key(client)
    if _refused_until.get(key, 0.0) > time.monotonic():
        return False
    try:
        await client.assistant_threads_setStatus(
            channel_id=context.channel, thread_ts=context.thread, status=status
        )
        return True
    except SlackApiError as exc:
        code = error_code(exc)
        if exc.response.status_code != 429 and code not in ("ratelimited", "internal_error"):
            _refused_until[key] = time.monotonic() + UNAVAILABLE_FOR_SECONDS
        log.warning("assistant.threads.setStatus refused (%s): the progress message shows the status", code)
        return False


def progress_blocks(text: str, task_id: str, *, running: bool) -> list[dict[str, object]]:
    """The progress message: its text, with a Stop button beside it while the task runs."""
    if not running:
        return [SectionBlock(text=MarkdownTextObject(text=text)).to_dict()]
    stop = ButtonElement(
        text="Stop",
        action_id=STOP_ACTION,
        value=task_id,
        style="danger",
        confirm=ConfirmObject(
            title="Stop this task?",
            text="The agent stops where it is and says what it did so far.",
            confirm="Stop",
            deny="Keep going",
        ),
    )
    return [
        SectionBlock(
            block_id=f"progress:{task_id}"[:255], text=MarkdownTextObject(text=text), accessory=stop
        ).to_dict()
    ]
