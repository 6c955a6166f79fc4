"""What a recorded Linear agent session event does: start, steer or decide a task.

- `created` (the agent was delegated an issue or mentioned): the first `thought` goes out at
  once (Linear marks a session unresponsive without an activity within 10 seconds; its id
  derives from the session, so it is sent once however often this runs), then the task starts
  under an id derived from the session, and the session's external URL points at the
  dashboard's task page.
- `prompted` (someone wrote in the session): "approve"/"deny" (or "yes"/"no") while the task
  waits for an approval is a decision through the one approval update
  (`surfaces.decisions.decide`, approver `linear:<user id>`), and the person hears in the
  session whether it counted; "stop" cancels; anything else steers the running task
  (`user_message`). A prompt in a session whose task has ended starts the session's next task.

Only people the agent's `spec.surfaces.linear.triggers` allows may start or steer; issues of
teams no agent is bound to are refused in the session.
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client, WorkflowExecutionStatus

from activities.linear import queries
from activities.linear.client import LinearError, LinearNotConfigured, graphql
from activities.linear.sessions import post_activity, set_external_url
from activities.store.agents import StoredAgent, agent_for_linear_team
from config.settings import Settings
from config.surfaces import LinearSurface
from surfaces.decisions import decide
from surfaces.linear import events
from surfaces.outcome import Outcome
from surfaces.tasks import start_task, task_id_for
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, CancelRequest, Decision, SurfaceContext, UserMessage

log = logging.getLogger("openloop.linear")

FIRST_THOUGHT = "On it: I'm reading the issue and starting a task."
URL_LABEL = "OpenLoop task"


class LinearDispatcher:
    def __init__(self, settings: Settings, client: Client, pool: AsyncConnectionPool) -> None:
        self.settings, self.client, self.pool = settings, client, pool

    async def handle(self, payload: dict[str, Any]) -> Outcome:
        try:
            event = events.session_event(payload)
        except ValueError as exc:
            return Outcome(f"malformed: {exc}")
        if event is None:
            return Outcome(f"ignored: {payload.get('type')} {payload.get('action')}")
        delivery = str(payload.get("_delivery") or "")
        # Refusals below are the session's first activity themselves (an `error`).
        agent = await agent_for_linear_team(self.pool, event.team_key, event.team_id)
        linear = agent.config.spec.surfaces.linear if agent is not None else None
        if agent is None or linear is None:
            body = f"No OpenLoop agent works on team {event.team_key}'s issues; nothing was started."
            await self._say(event.session_id, {"type": "error", "body": body}, f"unbound:{delivery}")
            return Outcome(f"ignored: no agent is bound to team {event.team_key}")
        if not linear.may_trigger(event.user_id, event.user_email or await self._email(event, linear)):
            body = (
                f"You're not on the list of people who may ask {agent.name} for work "
                "(spec.surfaces.linear.triggers)."
            )
            await self._say(event.session_id, {"type": "error", "body": body}, f"refused:{delivery}")
            return Outcome(f"ignored: {event.user} may not trigger {agent.name}")
        if event.action == "created":
            await self._say(event.session_id, {"type": "thought", "body": FIRST_THOUGHT}, "first")
            return await self._start(agent, event, task_id_for("linear", event.session_id), delivery)
        return await self._prompted(agent, event, delivery)

    async def _prompted(self, agent: StoredAgent, event: events.SessionEvent, delivery: str) -> Outcome:
        task_id = await self._session_task(event.session_id)
        if task_id is None or not await self._running(task_id):
            next_id = task_id_for("linear", f"{event.session_id}:{event.activity_id or delivery}")
            return await self._start(agent, event, next_id, delivery)
        handle = self.client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
        if event.signal == "stop" or event.text.strip().lower() in ("stop", "cancel"):
            await handle.signal(
                AgentTaskWorkflow.cancel, CancelRequest(by=event.user, reason="stopped from Linear")
            )
            return Outcome(f"cancelled {task_id}")
        approve = events.decision_word(event.text)
        pending = (
            (await handle.query(AgentTaskWorkflow.status)).pending_approval if approve is not None else None
        )
        if pending is not None and approve is not None:
            answer = ApprovalDecision(pending.request_id, pending.action_id, event.user)
            decision = Decision(approve=answer) if approve else Decision(deny=answer)
            verdict = await decide(handle, self.settings.database_url, decision)
            if not verdict.counted:
                body = f"Your decision did not count: {verdict.reason}."
                await self._say(event.session_id, {"type": "thought", "body": body}, f"refused:{delivery}")
            return Outcome(f"decision on {task_id}: {'counted' if verdict.counted else verdict.problem}")
        await handle.signal(AgentTaskWorkflow.user_message, UserMessage(user=event.user, text=event.text))
        return Outcome(f"steered {task_id}")

    async def _start(
        self, agent: StoredAgent, event: events.SessionEvent, task_id: str, delivery: str
    ) -> Outcome:
        context = SurfaceContext(
            surface="linear",
            channel=event.team_key,
            user=event.user,
            thread=event.session_id,
            event_id=delivery or None,
            reply_target=event.issue_id,
        )
        request = events.request_for(event)
        _, started = await start_task(self.client, self.settings, agent, context, request, task_id=task_id)
        await self._remember(agent, event, task_id)
        if started:
            from surfaces.web.auth import dashboard_base

            url = f"{dashboard_base(self.settings)}/tasks/{task_id}"
            try:
                await set_external_url(self.settings, event.session_id, url, URL_LABEL)
            except (LinearError, LinearNotConfigured, OSError) as exc:
                log.warning("session %s: external URL not set: %s", event.session_id, exc)
        return Outcome(f"{'started' if started else 'already started'} {task_id}")

    async def _say(self, session_id: str, content: dict[str, Any], key: str) -> None:
        """An activity in the session, once per key; best effort (the task still runs)."""
        try:
            await post_activity(self.settings, session_id, content, key)
        except (LinearError, LinearNotConfigured, OSError) as exc:
            log.warning("session %s: %s activity not sent: %s", session_id, content.get("type"), exc)

    async def _email(self, event: events.SessionEvent, linear: LinearSurface) -> str | None:
        """The person's email, read only when the trigger list names people by email."""
        if not event.user_id or not any("@" in user for user in linear.triggers.users):
            return None
        try:
            user = (await graphql(self.settings, queries.USER, {"id": event.user_id})).get("user") or {}
        except (LinearError, LinearNotConfigured, OSError):
            return None
        return str(user.get("email")) if user.get("email") else None

    async def _session_task(self, session_id: str) -> str | None:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT task_id FROM linear_sessions WHERE session_id = %s", (session_id,)
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        return str(row["task_id"] if isinstance(row, dict) else row[0])

    async def _remember(self, agent: StoredAgent, event: events.SessionEvent, task_id: str) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(
                "INSERT INTO linear_sessions (session_id, agent, task_id, issue_id, team)"
                " VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (session_id) DO UPDATE SET task_id = excluded.task_id, updated_at = now()",
                (event.session_id, agent.name, task_id, event.issue_id, event.team_key),
            )

    async def _running(self, task_id: str) -> bool:
        try:
            description = await self.client.get_workflow_handle(task_id).describe()
        except Exception as exc:  # noqa: BLE001 - gone (retention) or unknown: nothing runs
            log.info("task %s not described: %s", task_id, type(exc).__name__)
            return False
        return description.status == WorkflowExecutionStatus.RUNNING
