"""What a Slack event or button click does, shared by the HTTP endpoints and Socket Mode.

Events reach `handle_event` from the Slack inbox, after the ack: it starts the task (the
workflow id derives from the event id, so a redelivered event finds the task it started) or
signals it. Button clicks reach `handle_interaction` before the ack, which only reads them:
an approval click is sent after the ack through the task's decision update
(`surfaces.decisions.decide`), and a click that did not count is told why, privately ("Show
diff" only acks too: `surfaces.slack.diff_button` posts the diff afterwards). Anything else
Slack should see (a "no agent here" reply) is a follow-up run afterwards as well. Agent work
never runs here.

`Outcome` lives in `surfaces.outcome`, the payload readers in `surfaces.slack.payloads`,
the thread-to-task lookup in `surfaces.slack.waiting`.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from temporalio.client import Client
from temporalio.service import RPCError

from activities.slack import blocks
from activities.slack.client import SlackNotConfigured, bot_client, error_code
from activities.slack.names import directory
from activities.slack.status import STOP_ACTION
from activities.store.agents import StoredAgent, agent_for_slack_channel
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.decisions import FAILED, NO_ANSWER, closed_reason, decide
from surfaces.limits import too_large_for_temporal
from surfaces.outcome import Outcome
from surfaces.slack import directory_events
from surfaces.slack.assistant import DirectMessages, allowed_bot, is_direct
from surfaces.slack.diff_button import DiffButton
from surfaces.slack.payloads import HUMAN_SUBTYPES, bot_user_of, from_a_bot, strip_mention
from surfaces.slack.steering import Steering
from surfaces.slack.waiting import RecentKeys, WaitingTasks
from surfaces.tasks import start_task, task_id_for
from workflows.types import ApprovalDecision, Decision, DecisionVerdict, SurfaceContext

log = logging.getLogger("openloop.slack")

DEFAULT_REQUEST = "Read this thread and help with it."


class SlackDispatcher:
    def __init__(self, settings: Settings, temporal: Client):
        self.settings = settings
        self.temporal = temporal
        self.waiting = WaitingTasks(temporal)
        self.diff_button = DiffButton(settings, temporal)
        self._recent = RecentKeys()
        self.steering = Steering(settings, temporal, self.waiting, self._may_trigger, self._recent)
        self.direct = DirectMessages(settings, temporal, self.steering, self._may_trigger)
        self._own_user: str | None = None

    # Events ------------------------------------------------------------------------------

    async def handle_event(self, payload: dict[str, Any], retry_num: str | None = None) -> Outcome:
        event, event_id = payload.get("event"), payload.get("event_id")
        if payload.get("type") != "event_callback":
            return Outcome("ignored: not an event callback")
        if not isinstance(event, dict) or not isinstance(event_id, str) or not event_id:
            return Outcome("malformed: no event or event_id", status=400)
        if event.get("type") in directory_events.DIRECTORY_EVENTS:  # a rename, App Home opened
            return await directory_events.handle(self.settings, self.temporal, event, event_id)
        bot_user = bot_user_of(payload) or await self._bot_user()
        if from_a_bot(event, bot_user):
            if not await allowed_bot(self.settings, event, bot_user):
                return Outcome("ignored: from a bot")
            event = {**event, "user": event["bot_id"]}  # a bot the agent lists asks as itself
        if event.get("type") == "app_mention":
            return await self._mention(event, event_id, bot_user, retry_num)
        if event.get("type") == "message" and is_direct(event):
            return await self.direct.message(event, event_id, bot_user)
        if event.get("type") == "message":
            return await self._thread_reply(event, event_id, bot_user)
        return Outcome(f"ignored: event type {event.get('type')!r}")

    async def _mention(
        self, event: dict[str, Any], event_id: str, bot_user: str | None, retry_num: str | None
    ) -> Outcome:
        channel, user, ts = event.get("channel"), event.get("user"), event.get("ts")
        if not (isinstance(channel, str) and isinstance(user, str) and isinstance(ts, str)):
            return Outcome("malformed: app_mention without channel, user or ts", status=400)
        thread = str(event.get("thread_ts") or ts)
        if thread != ts:  # a mention in the thread of a running task steers it ("@agent yes")
            said = strip_mention(str(event.get("text") or ""), bot_user)
            steered = await self.steering.message(event_id, channel, thread, ts, user, said)
            if steered is not None:
                return steered
        pool = await get_pool(self.settings.require_database_url())
        agent = await agent_for_slack_channel(pool, channel)
        if agent is None:
            if f"no-agent:{event_id}" in self._recent:
                return Outcome("duplicate: no agent")
            self._recent.remember(f"no-agent:{event_id}")
            return Outcome(
                "no agent for channel",
                followups=[lambda: self._post(channel, thread, blocks.no_agent_text(channel))],
            )
        if not await self._may_trigger(agent, user):
            return Outcome(
                "not allowed to trigger",
                followups=[
                    lambda: self._ephemeral(
                        channel, user, thread, blocks.not_allowed_to_trigger_text(agent.name)
                    )
                ],
            )
        context = SurfaceContext(
            surface="slack", channel=channel, user=user, thread=thread, event_id=event_id, reply_target=ts
        )
        request = strip_mention(str(event.get("text") or ""), bot_user) or DEFAULT_REQUEST
        task_id = task_id_for("slack", event_id)
        try:
            _, started = await start_task(
                self.temporal, self.settings, agent, context, request, task_id=task_id
            )
        except RPCError as exc:
            log.error("could not start %s for %s: %s", task_id, event_id, exc.status.name)
            if too_large_for_temporal(exc):  # starting it again would be refused again
                return Outcome("start refused: too large for Temporal", status=413)
            return Outcome("start failed", status=503)  # Slack retries: nothing is lost
        log.info(
            "slack %s %s -> %s (retry %s)",
            event_id,
            "started" if started else "duplicate",
            task_id,
            retry_num or 0,
        )
        return Outcome("started" if started else "duplicate: task exists")

    async def _thread_reply(self, event: dict[str, Any], event_id: str, bot_user: str | None) -> Outcome:
        channel, user, text = event.get("channel"), event.get("user"), event.get("text") or ""
        thread, ts = event.get("thread_ts"), event.get("ts")
        if event.get("subtype") not in HUMAN_SUBTYPES or not thread or thread == ts:
            return Outcome("ignored: not a reply in a thread")
        if not (isinstance(channel, str) and isinstance(user, str)):
            return Outcome("ignored: no channel or user")
        if bot_user and f"<@{bot_user}>" in text:
            return Outcome("ignored: a mention (handled as app_mention)")
        steered = await self.steering.message(event_id, channel, str(thread), str(ts), user, str(text))
        return steered or Outcome("ignored: no task running in this thread")

    async def _bot_user(self) -> str | None:
        """Our bot's user id from auth.test, once, for payloads without `authorizations`."""
        if self._own_user is None and self.settings.slack_bot_token is not None:
            try:
                self._own_user = str((await bot_client(self.settings).auth_test())["user_id"])
            except (SlackApiError, KeyError) as exc:
                log.warning("auth.test failed: %s", _slack_reason(exc))
        return self._own_user

    async def _may_trigger(self, agent: StoredAgent, user: str) -> bool:
        """`triggers`: listed users or user-group members; everyone only when no list is set."""
        slack = agent.config.spec.surfaces.slack
        if slack is None:
            return False
        triggers = slack.triggers
        if user in triggers.users or user in triggers.bots:
            return True
        for group in triggers.usergroups:
            if user in await self._group_members(group):
                return True
        return triggers.everyone and not triggers.users and not triggers.usergroups

    async def _group_members(self, group: str) -> frozenset[str]:
        """The group's members from the process's Slack directory, which approvals share (one
        short-lived cache of user groups, `activities.slack.names`)."""
        try:
            members = await directory(self.settings).members(group)
        except (SlackApiError, SlackNotConfigured) as exc:
            # Fail closed: a group we cannot read admits nobody.
            log.warning("cannot read user group %s: %s", group, _slack_reason(exc))
            return frozenset()
        return frozenset(members or ())

    # Interactivity -----------------------------------------------------------------------

    async def handle_interaction(self, payload: dict[str, Any]) -> Outcome:
        if payload.get("type") != "block_actions":
            return Outcome(f"unsupported interaction {payload.get('type')!r}", status=400)
        actions = payload.get("actions")
        action = actions[0] if isinstance(actions, list) and actions else None
        if isinstance(action, dict) and action.get("action_id") == blocks.SHOW_DIFF_ACTION:
            return await self.diff_button.clicked(payload, action)
        if isinstance(action, dict) and action.get("action_id") == STOP_ACTION:
            return await self.steering.stop_clicked(payload, action)
        if not isinstance(action, dict) or action.get("action_id") not in blocks.APPROVAL_ACTIONS:
            return Outcome("unknown action id", status=400)
        parsed = blocks.parse_button_value(str(action.get("value") or ""))
        user = _obj(payload.get("user")).get("id")
        container = _obj(payload.get("container"))
        channel = _obj(payload.get("channel")).get("id") or container.get("channel_id")
        thread_ts = _obj(payload.get("message")).get("thread_ts") or container.get("thread_ts")
        thread = str(thread_ts) if thread_ts else None
        if parsed is None or not isinstance(user, str) or not isinstance(channel, str):
            return Outcome("malformed approval click", status=400)
        task_id, request_id, action_id = parsed
        answer = ApprovalDecision(request_id, action_id, approver=user)
        verb = "approve" if action["action_id"] == blocks.APPROVE_ACTION else "deny"
        decision = Decision(approve=answer) if verb == "approve" else Decision(deny=answer)

        async def decided() -> None:
            await self._decide(task_id, decision, channel, user, thread)

        return Outcome(f"{verb} click on {task_id}", followups=[decided])

    async def _decide(
        self, task_id: str, decision: Decision, channel: str, user: str, thread: str | None
    ) -> None:
        """Send a click's decision to the task; tell the clicker, privately, if it did not count."""
        try:
            handle = self.temporal.get_workflow_handle(task_id)
            verdict = await decide(handle, self.settings.database_url, decision)
        except RPCError as exc:
            log.error("could not send a decision to %s: %s", task_id, exc.status.name)
            verdict = DecisionVerdict(False, "Temporal could not be reached", FAILED)
        if verdict.counted:
            log.info("slack click on %s by %s counted", task_id, user)
            return
        log.info("slack click on %s by %s not counted: %s", task_id, user, verdict.reason)
        await self._ephemeral(channel, user, thread, _not_counted_text(verdict))

    # Follow-ups ----------------------------------------------------------------------------

    async def _post(self, channel: str, thread: str, text: str) -> None:
        await bot_client(self.settings).chat_postMessage(channel=channel, thread_ts=thread, text=text)

    async def _ephemeral(self, channel: str, user: str, thread: str | None, text: str) -> None:
        await bot_client(self.settings).chat_postEphemeral(
            channel=channel, user=user, text=text, thread_ts=thread
        )


def _not_counted_text(verdict: DecisionVerdict) -> str:
    """What the clicker reads when their click did not count."""
    if verdict.problem == "not_approver":
        return blocks.not_allowed_to_approve_text(verdict.approvers)
    if verdict.problem == NO_ANSWER:
        return f"Your decision is not confirmed: {verdict.reason}. It counts if the request is open then."
    if verdict.problem in (FAILED, "invalid"):
        return f"Your decision could not be taken ({verdict.reason}); nothing was changed. Try again later."
    return blocks.request_closed_text(closed_reason(verdict.problem))


def _obj(value: object) -> dict[str, Any]:
    """A JSON object from a payload, or an empty one when Slack (or a forger) sent another type."""
    return value if isinstance(value, dict) else {}


def _slack_reason(exc: Exception) -> str:
    return error_code(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
