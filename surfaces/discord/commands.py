"""Discord interactions after their ack: the `/openloop` slash command and the approval buttons.

Discord wants an answer to an interaction within 3 seconds, so the endpoint answers "thinking"
(a deferred response) and records the interaction; this module does the work from the inbox and
edits that response with the outcome (the interaction's token stays valid for 15 minutes).

- `/openloop ask request:<text>` starts a task like a mention does: the response message becomes
  the thread's first message, and the answer goes to the thread.
- `/openloop status` lists the channel's running tasks, privately.
- Approve/Deny: the click becomes the one approval update (`surfaces.decisions.decide`) with
  approver `discord:<user id>`; the task checks it against the approvers the request was
  resolved to (a role's members included). The clicker reads, privately, whether it counted.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from activities.discord import messages
from activities.discord.client import discord_call
from activities.store.agents import agent_for_discord_channel
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.decisions import FAILED, NO_ANSWER, closed_reason, decide
from surfaces.discord.events import PREFIX, may_trigger
from surfaces.outcome import Outcome
from surfaces.tasks import start_task, task_id_for
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, Decision, DecisionVerdict, SurfaceContext

log = logging.getLogger("openloop.discord")

THREAD_TYPES = (10, 11, 12)  # announcement, public and private threads


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def user_of(interaction: dict[str, Any]) -> dict[str, Any]:
    """The person who acted: `member.user` in a server, `user` in a DM."""
    return _obj(_obj(interaction.get("member")).get("user")) or _obj(interaction.get("user"))


def command_options(interaction: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """(subcommand, its options) of `/openloop <subcommand> ...`."""
    options = _obj(interaction.get("data")).get("options") or []
    first = options[0] if options and isinstance(options[0], dict) else {}
    values = {
        str(o.get("name")): str(o.get("value")) for o in first.get("options") or [] if isinstance(o, dict)
    }
    return str(first.get("name") or ""), values


class Interactions:
    def __init__(self, settings: Settings, temporal: Client):
        self.settings = settings
        self.temporal = temporal

    async def handle(self, interaction: dict[str, Any]) -> Outcome:
        if interaction.get("type") == 2:
            return await self._command(interaction)
        if interaction.get("type") == 3:
            return await self._click(interaction)
        return Outcome(f"ignored: interaction type {interaction.get('type')!r}")

    # /openloop ---------------------------------------------------------------------------------

    async def _command(self, interaction: dict[str, Any]) -> Outcome:
        name, options = command_options(interaction)
        channel = _obj(interaction.get("channel"))
        in_thread = channel.get("type") in THREAD_TYPES
        channel_id = str(channel.get("parent_id") if in_thread else interaction.get("channel_id"))
        if name == "status":
            return await self._status(interaction, channel_id)
        if name != "ask":
            return await self._answer(interaction, f"`/openloop {name}` is not a command I know.")
        pool = await get_pool(self.settings.require_database_url())
        agent = await agent_for_discord_channel(pool, channel_id, None if in_thread else channel.get("name"))
        if agent is None or agent.config.spec.surfaces.discord is None:
            return await self._answer(
                interaction, "No agent is bound to this channel (`spec.surfaces.discord`)."
            )
        user = user_of(interaction)
        surface = agent.config.spec.surfaces.discord
        roles = [str(r) for r in _obj(interaction.get("member")).get("roles") or []]
        names = await self._role_names(str(interaction.get("guild_id") or ""), roles, surface.triggers.roles)
        if not may_trigger(surface, str(user.get("id")), roles, names):
            return await self._answer(
                interaction, f"You're not on the list of people who can ask **{agent.name}**."
            )
        request = options.get("request") or "Help with this channel."
        message_id = await self._edit_response(interaction, f"> {request[:300]}\nOn it.")
        context = SurfaceContext(
            surface="discord",
            channel=channel_id,
            user=PREFIX + str(user.get("id")),
            thread=str(interaction.get("channel_id")) if in_thread else message_id,
            event_id=str(interaction.get("id")),
            reply_target=message_id,
        )
        task_id = task_id_for("discord", str(interaction.get("id")))
        try:
            await start_task(self.temporal, self.settings, agent, context, request, task_id=task_id)
        except RPCError as exc:
            log.error("could not start %s: %s", task_id, exc.status.name)
            return Outcome("start failed", status=503)
        return Outcome("started from /openloop ask")

    async def _role_names(self, guild_id: str, role_ids: list[str], listed: list[str]) -> list[str]:
        """The names of the clicker's roles, read only when the triggers name roles by name
        (an interaction carries role ids)."""
        if not guild_id or not role_ids or all(r.isdigit() for r in listed):
            return []
        roles = await discord_call(self.settings, "GET", "/guilds/{guild_id}/roles", guild_id=guild_id) or []
        return [str(r.get("name")) for r in roles if str(r.get("id")) in role_ids]

    async def _status(self, interaction: dict[str, Any], channel_id: str) -> Outcome:
        query = (
            f"{search.CHANNEL.name} = '{channel_id}' AND {search.SURFACE.name} = 'discord' "
            "AND ExecutionStatus = 'Running'"
        )
        lines = []
        async for execution in self.temporal.list_workflows(query, limit=20):
            summary = (await execution.memo()).get("description") or ""
            lines.append(f"• `{execution.id}` {summary}")
        text = "\n".join(lines) or "No task is running in this channel."
        await self._answer(interaction, text[: messages.MAX_CONTENT])
        return Outcome("status shown")

    # Approve / Deny ------------------------------------------------------------------------------

    async def _click(self, interaction: dict[str, Any]) -> Outcome:
        parsed = messages.parse_button_id(str(_obj(interaction.get("data")).get("custom_id") or ""))
        user_id = user_of(interaction).get("id")
        if parsed is None or not user_id:
            return await self._answer(interaction, "This button is not one of OpenLoop's.")
        verb, task_id, hashed = parsed
        handle = self.temporal.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
        try:
            pending = (await handle.query(AgentTaskWorkflow.status)).pending_approval
        except RPCError:
            pending = None
        if pending is None or messages.request_hash(pending.request_id) != hashed:
            return await self._answer(
                interaction, "This approval request was already decided or has expired; nothing was changed."
            )
        answer = ApprovalDecision(
            pending.request_id, pending.action_id, approver=PREFIX + str(user_id), note="discord"
        )
        decision = Decision(approve=answer) if verb == messages.APPROVE else Decision(deny=answer)
        try:
            verdict = await decide(handle, self.settings.database_url, decision)
        except RPCError as exc:
            log.error("could not send a decision to %s: %s", task_id, exc.status.name)
            verdict = DecisionVerdict(False, "Temporal could not be reached", FAILED)
        log.info(
            "discord click on %s by %s: %s",
            task_id,
            user_id,
            "counted" if verdict.counted else verdict.reason,
        )
        said = "approved" if verb == messages.APPROVE else "denied"
        return await self._answer(
            interaction, f"You {said} it." if verdict.counted else not_counted_text(verdict)
        )

    async def _answer(self, interaction: dict[str, Any], text: str) -> Outcome:
        await self._edit_response(interaction, text)
        return Outcome(f"answered: {text[:80]}")

    async def _edit_response(self, interaction: dict[str, Any], text: str) -> str:
        """Edit the deferred response to say `text`; the response message's id."""
        posted = await discord_call(
            self.settings,
            "PATCH",
            "/webhooks/{webhook_id}/{webhook_token}/messages/@original",
            json={"content": text, "allowed_mentions": {"parse": []}},
            webhook_id=str(interaction.get("application_id")),
            webhook_token=str(interaction.get("token")),
        )
        return str((posted or {}).get("id") or "")


def not_counted_text(verdict: DecisionVerdict) -> str:
    if verdict.problem == "not_approver":
        names = ", ".join(messages.mention(a) for a in verdict.approvers) or "nobody"
        return f"You're not allowed to decide this request; only {names} can. Nothing was changed."
    if verdict.problem == NO_ANSWER:
        return f"Your decision is not confirmed: {verdict.reason}. It counts if the request is open then."
    if verdict.problem in (FAILED, "invalid"):
        return f"Your decision could not be taken ({verdict.reason}); nothing was changed. Try again later."
    return f"This approval request {closed_reason(verdict.problem)}; nothing was changed."
