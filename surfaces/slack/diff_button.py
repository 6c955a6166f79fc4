"""The "Show diff" button on a draft pull request's approval card: the whole diff the request
is for, posted as a snippet in the card's thread.

The click is acked at once; the work is a follow-up. The diff posted is the one the pending
request names (its `diff_sha256`, read from the task itself), stored in Postgres when the
workspace changed, so what a reviewer reads is exactly what an approval would commit. A click
on a request that no longer waits, or a diff that is not stored, gets an ephemeral answer
that names the CLI command instead. The card is visible to the whole channel, so anyone in it
may read the diff; deciding stays with the approvers.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

from slack_sdk.errors import SlackApiError
from temporalio.client import Client

from activities.slack import blocks
from activities.slack.client import bot_client, error_code
from activities.store.db import get_pool
from activities.store.loops import load_diff
from config.settings import Settings
from surfaces.outcome import Outcome
from workflows.agent_task import AgentTaskWorkflow
from workflows.pull_request_card import PullRequestCard
from workflows.types import TaskStatusView

log = logging.getLogger("openloop.slack")

QUERY_TIMEOUT = timedelta(seconds=5)


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class DiffButton:
    def __init__(self, settings: Settings, temporal: Client):
        self.settings = settings
        self.temporal = temporal

    async def clicked(self, payload: dict[str, Any], action: dict[str, Any]) -> Outcome:
        """Ack now; post the diff (or say why not) right after."""
        parsed = blocks.parse_button_value(str(action.get("value") or ""))
        user = _obj(payload.get("user")).get("id")
        container, message = _obj(payload.get("container")), _obj(payload.get("message"))
        channel = _obj(payload.get("channel")).get("id") or container.get("channel_id")
        # The card's thread; a card posted at the top of the channel starts one.
        thread = message.get("thread_ts") or container.get("thread_ts")
        thread = thread or message.get("ts") or container.get("message_ts")
        if parsed is None or not isinstance(user, str) or not isinstance(channel, str) or not thread:
            return Outcome("malformed show-diff click", status=400)
        task_id, request_id, _ = parsed
        return Outcome(
            "show diff",
            followups=[lambda: self.post_diff(task_id, request_id, channel, str(thread), user)],
        )

    async def post_diff(self, task_id: str, request_id: str, channel: str, thread: str, user: str) -> None:
        command = f"`openloop tasks diff {task_id}`"
        view = await self._status(task_id)
        if view is None:
            await self._tell(
                channel, user, thread, f"The task did not answer just now; try again, or {command}."
            )
            return
        pending = view.pending_approval
        card = PullRequestCard.of(pending) if pending and pending.request_id == request_id else None
        if card is None:
            closed = "is no longer waiting for a decision"
            await self._tell(channel, user, thread, f"{blocks.request_closed_text(closed)} See {command}.")
            return
        diff = await load_diff(await get_pool(self.settings.require_database_url()), card.diff_sha256)
        if diff is None:
            await self._tell(
                channel, user, thread, f"The diff `{card.short_sha}` is not stored any more; see {command}."
            )
            return
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", task_id).strip("-.") or "task"
        try:
            await bot_client(self.settings).files_upload_v2(
                channel=channel,
                thread_ts=thread,
                content=diff,
                filename=f"{name}-{card.short_sha}.diff",
                title=f"{card.repo} → {card.base}: {card.diff}",
                snippet_type="diff",
                initial_comment=f"The whole diff of `{blocks.escape(task_id)}`, for {blocks.mention(user)}.",
            )
        except SlackApiError as exc:
            log.warning("diff of %s not posted in %s: %s", task_id, channel, error_code(exc))
            await self._tell(
                channel, user, thread, f"Slack refused the snippet ({error_code(exc)}); see {command}."
            )
            return
        log.info("slack click show diff on %s by %s", task_id, user)

    async def _status(self, task_id: str) -> TaskStatusView | None:
        handle = self.temporal.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
        try:
            view: TaskStatusView = await handle.query(AgentTaskWorkflow.status, rpc_timeout=QUERY_TIMEOUT)
            return view
        except Exception as exc:  # not found, finished with no worker, timed out: all "unknown"
            log.warning("status query of %s failed: %s", task_id, type(exc).__name__)
            return None

    async def _tell(self, channel: str, user: str, thread: str, text: str) -> None:
        await bot_client(self.settings).chat_postEphemeral(
            channel=channel, user=user, text=text, thread_ts=thread
        )
