"""What a Discord message does, dispatched from the inbox (`surfaces.inbox`) after it was recorded.

A mention of the bot in a bound channel starts a task (its id derives from the message id, so
a message seen twice — a Gateway resume, two replicas — finds the task it started); the answer
goes to a thread started from that message. A message in the thread of a running task steers
it: a plain reply or a mention reaches the task as a `user_message` signal ("yes" goes on with
what it proposed, in the same task), "stop" cancels it. Only people the agent's
`spec.surfaces.discord.triggers` admit may start or steer; anyone else is told so in the thread
and the refusal is audited (kind `steer_refused` / `trigger_refused`). Agent work never runs here.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from activities.discord.client import discord_call
from activities.store import ledger
from activities.store.agents import StoredAgent, agent_for_discord_channel
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.discord.events import DiscordMessage, may_trigger, request_text
from surfaces.limits import too_large_for_temporal
from surfaces.outcome import Outcome
from surfaces.slack.steering import STOP_REASON, is_stop
from surfaces.slack.waiting import RecentKeys, WaitingTasks
from surfaces.tasks import start_task, task_id_for
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import AuditEvent, CancelRequest, SurfaceContext, UserMessage

log = logging.getLogger("openloop.discord")

STOPPED_FROM = STOP_REASON.replace("Slack", "Discord")


def not_allowed_text(agent_name: str) -> str:
    return (
        f"You're not on the list of people who can ask **{agent_name}** for work here "
        "(`spec.surfaces.discord.triggers`), so nothing was passed on. Ask a server admin to add you."
    )


class DiscordDispatcher:
    def __init__(self, settings: Settings, temporal: Client):
        self.settings = settings
        self.temporal = temporal
        self.waiting = WaitingTasks(temporal, surface="discord")
        self._recent = RecentKeys()

    async def handle(self, payload: dict[str, Any]) -> Outcome:
        if payload.get("kind") != "message":
            return Outcome(f"ignored: {payload.get('kind')!r}")
        message = DiscordMessage.from_payload(payload)
        pool = await get_pool(self.settings.require_database_url())
        agent = await agent_for_discord_channel(pool, message.channel, message.channel_name)
        if agent is None:
            return Outcome("ignored: no agent for this channel")
        if message.in_thread:
            steered = await self._steer(agent, message)
            if steered is not None:
                return steered
        if not message.mentions_bot:
            return Outcome("ignored: not a mention, no task in this thread")
        return await self._start(agent, message)

    async def _start(self, agent: StoredAgent, message: DiscordMessage) -> Outcome:
        if not self._admits(agent, message):
            return await self._refuse(agent, message, f"trigger:{message.message_id}", "trigger_refused")
        context = SurfaceContext(
            surface="discord",
            channel=message.channel,
            user=message.user,
            # In a channel the answer goes to a thread started from the message (its id);
            # in a thread, there.
            thread=message.channel_id if message.in_thread else message.message_id,
            event_id=message.message_id,
            reply_target=message.message_id,
        )
        task_id = task_id_for("discord", message.message_id)
        try:
            _, started = await start_task(
                self.temporal,
                self.settings,
                agent,
                context,
                request_text(message.content),
                task_id=task_id,
            )
        except RPCError as exc:
            log.error("could not start %s for %s: %s", task_id, message.message_id, exc.status.name)
            if too_large_for_temporal(exc):
                return Outcome("start refused: too large for Temporal", status=413)
            return Outcome("start failed", status=503)  # the inbox retries: nothing is lost
        log.info("discord %s %s -> %s", message.message_id, "started" if started else "duplicate", task_id)
        return Outcome("started" if started else "duplicate: task exists")

    async def _steer(self, agent: StoredAgent, message: DiscordMessage) -> Outcome | None:
        """Hand a thread message to the task running there; None when none runs there."""
        handle = await self.waiting.find(message.channel, message.channel_id)
        if handle is None:
            return None
        if f"steer:{message.message_id}" in self._recent:
            return Outcome("duplicate: already signalled")
        if not self._admits(agent, message):
            return await self._refuse(
                agent, message, f"steer:{message.message_id}", "steer_refused", handle.id
            )
        text = request_text(message.content)
        try:
            if is_stop(text):
                await handle.signal(
                    AgentTaskWorkflow.cancel, CancelRequest(by=message.user, reason=STOPPED_FROM)
                )
                note = "signalled cancel"
            else:
                await handle.signal(AgentTaskWorkflow.user_message, UserMessage(user=message.user, text=text))
                note = "signalled user_message"
        except RPCError as exc:
            log.error("could not signal %s: %s", handle.id, exc.status.name)
            return Outcome("signal failed", status=503)
        self._recent.remember(f"steer:{message.message_id}")  # only once delivered
        log.info("discord %s -> %s to %s", message.message_id, note.removeprefix("signalled "), handle.id)
        return Outcome(note, followups=[lambda: self._react(message, "👀")])

    def _admits(self, agent: StoredAgent, message: DiscordMessage) -> bool:
        surface = agent.config.spec.surfaces.discord
        return surface is not None and may_trigger(
            surface, message.author_id, message.role_ids, message.role_names
        )

    async def _refuse(
        self, agent: StoredAgent, message: DiscordMessage, key: str, kind: str, task_id: str = ""
    ) -> Outcome:
        what = "a message in the thread" if kind == "steer_refused" else "a mention"
        event = AuditEvent(
            task_id=task_id or task_id_for("discord", message.message_id),
            step=0,
            key=f"{kind}:{key}"[:200],
            agent=agent.name,
            workspace=agent.workspace,
            channel=message.channel,
            kind=kind,
            actor=message.user,
            outcome=f"refused: {message.user} may not trigger {agent.name}; {what} was not passed on",
        )
        pool = await get_pool(self.settings.require_database_url())
        async with pool.connection() as conn:
            await ledger.write_audit(conn, event)
        log.info("discord %s by %s refused: not allowed to trigger %s", kind, message.user, agent.name)
        return Outcome(
            f"refused: {kind}", followups=[lambda: self._tell(message, not_allowed_text(agent.name))]
        )

    async def _tell(self, message: DiscordMessage, text: str) -> None:
        await discord_call(
            self.settings,
            "POST",
            "/channels/{channel_id}/messages",
            json={
                "content": text,
                "message_reference": {"message_id": message.message_id, "fail_if_not_exists": False},
                "allowed_mentions": {"parse": []},
            },
            channel_id=message.channel_id,
        )

    async def _react(self, message: DiscordMessage, emoji: str) -> None:
        await discord_call(
            self.settings,
            "PUT",
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me",
            channel_id=message.channel_id,
            message_id=message.message_id,
            emoji=emoji,
        )
