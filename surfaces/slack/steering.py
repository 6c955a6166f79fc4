"""Steering a running task from its Slack thread.

A message in the thread of a running task — a plain reply, or one that mentions the agent —
reaches the task as a `user_message` signal, which its next model call reads; 👀 on the
message says it was heard (an answer to the agent's question is one such message: "yes"
goes on with what it proposed, in the same task). "stop" (or the progress message's Stop
button) sends the `cancel` signal: the task stops where it is and says what it did so far.

Only people allowed to trigger the agent (`spec.surfaces.slack.triggers`, the dispatcher's
rule) may steer it: anyone else is told so privately, the task hears nothing, and the
attempt is audited (kind `steer_refused`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError

from activities.slack.client import bot_client, error_code
from activities.slack.mrkdwn import escape
from activities.store import ledger
from activities.store.agents import StoredAgent, agent_for_slack_channel
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.outcome import Outcome
from surfaces.slack.waiting import RecentKeys, WaitingTasks
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import AuditEvent, CancelRequest, UserMessage

log = logging.getLogger("openloop.slack")

HEARD = "eyes"  # on a message the task took in
STOPPING = "octagonal_sign"  # on a "stop" the task took
STOP_REASON = "stopped from Slack"
_STOP = re.compile(r"^\W*(please\s+)?(stop|cancel|abort|halt)(\s+(it|this|that|now|please))*\W*$", re.I)

MayTrigger = Callable[[StoredAgent, str], Awaitable[bool]]


def is_stop(text: str) -> bool:
    """A message that asks the task to stop ("stop", "cancel", "please stop!")."""
    return bool(_STOP.match(text))


def not_allowed_to_steer_text(agent_name: str) -> str:
    return (
        f"You're not on the list of people who can ask *{escape(agent_name)}* for work here "
        "(`spec.surfaces.slack.triggers`), so the running task did not get your message. "
        "Ask a channel admin to add you."
    )


def task_ended_text() -> str:
    return "This task has already finished; there is nothing to stop."


class Steering:
    def __init__(
        self,
        settings: Settings,
        temporal: Client,
        tasks: WaitingTasks,
        may_trigger: MayTrigger,
        recent: RecentKeys,
    ) -> None:
        self.settings = settings
        self.temporal = temporal
        self.tasks = tasks
        self.may_trigger = may_trigger
        self.recent = recent

    async def message(
        self, event_id: str, channel: str, thread: str, ts: str, user: str, text: str
    ) -> Outcome | None:
        """Hand a thread message to the task running there; None when none runs there."""
        handle = await self.tasks.find(channel, thread)
        if handle is None:
            return None
        if f"steer:{event_id}" in self.recent:
            return Outcome("duplicate: already signalled")
        refused = await self._refused(f"msg:{event_id}", channel, thread, user, handle.id, "a message")
        if refused is not None:
            return refused
        if is_stop(text):
            await handle.signal(AgentTaskWorkflow.cancel, CancelRequest(by=user, reason=STOP_REASON))
            note, reaction = "signalled cancel", STOPPING
        else:
            await handle.signal(AgentTaskWorkflow.user_message, UserMessage(user=user, text=text))
            note, reaction = "signalled user_message", HEARD
        self.recent.remember(f"steer:{event_id}")  # only once delivered: a failure is retried
        log.info("slack %s -> %s to %s", event_id, note.removeprefix("signalled "), handle.id)
        return Outcome(note, followups=[lambda: self._react(channel, ts, reaction)])

    async def stop_clicked(self, payload: dict[str, Any], action: dict[str, Any]) -> Outcome:
        """The progress message's Stop button: cancel the task it names."""
        user = _obj(payload.get("user")).get("id")
        container = _obj(payload.get("container"))
        channel = _obj(payload.get("channel")).get("id") or container.get("channel_id")
        thread = _obj(payload.get("message")).get("thread_ts") or container.get("thread_ts")
        task_id = action.get("value")
        if not all(isinstance(v, str) and v for v in (user, channel, task_id)):
            return Outcome("malformed stop click", status=400)
        assert isinstance(user, str) and isinstance(channel, str) and isinstance(task_id, str)
        thread = str(thread) if thread else None
        handle: WorkflowHandle[Any, Any] = self.temporal.get_workflow_handle_for(
            AgentTaskWorkflow.run, task_id
        )
        try:
            running = (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        except RPCError:
            running = False
        if not running:
            return Outcome(
                "stop: task not running", followups=[self._tell(channel, user, thread, task_ended_text())]
            )
        click = str(container.get("message_ts") or payload.get("trigger_id") or "")
        refused = await self._refused(
            f"stop:{task_id}:{user}:{click}", channel, thread, user, task_id, "Stop"
        )
        if refused is not None:
            return refused
        try:
            await handle.signal(AgentTaskWorkflow.cancel, CancelRequest(by=user, reason=STOP_REASON))
        except RPCError as exc:
            log.error("could not signal cancel to %s: %s", task_id, exc.status.name)
            return Outcome("signal failed", status=503)
        log.info("slack stop click on %s by %s", task_id, user)
        return Outcome("signalled cancel")

    async def _refused(
        self, key: str, channel: str, thread: str | None, user: str, task_id: str, what: str
    ) -> Outcome | None:
        """None when `user` may steer the agent of `channel`; else audit it and say so privately."""
        pool = await get_pool(self.settings.require_database_url())
        agent = await agent_for_slack_channel(pool, channel)
        if agent is not None and await self.may_trigger(agent, user):
            return None
        name = agent.name if agent is not None else "the agent"
        event = AuditEvent(
            task_id=task_id,
            step=0,
            key=f"steer-refused:{key}"[:200],
            agent=agent.name if agent is not None else "",
            workspace=agent.workspace if agent is not None else "",
            channel=channel,
            kind="steer_refused",
            actor=user,
            outcome=f"refused: {user} may not trigger {name}; {what} in the thread was not passed on",
        )
        async with pool.connection() as conn:
            await ledger.write_audit(conn, event)
        log.info("slack steering of %s by %s refused: not allowed to trigger", task_id, user)
        return Outcome(
            "not allowed to steer",
            followups=[self._tell(channel, user, thread, not_allowed_to_steer_text(name))],
        )

    def _tell(self, channel: str, user: str, thread: str | None, text: str) -> Callable[[], Awaitable[None]]:
        async def tell() -> None:
            await bot_client(self.settings).chat_postEphemeral(
                channel=channel, user=user, text=text, thread_ts=thread
            )

        return tell

    async def _react(self, channel: str, ts: str, name: str) -> None:
        try:
            await bot_client(self.settings).reactions_add(channel=channel, timestamp=ts, name=name)
        except SlackApiError as exc:  # cosmetic: the task has the message either way
            log.info("reaction %s on %s failed: %s", name, ts, error_code(exc))


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
