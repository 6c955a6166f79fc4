"""The Zoom inbox's handler: a recorded transcript_completed delivery becomes one task.

After the ack, for each recorded delivery: the agent that takes the meeting (one naming its
host before one taking the whole account), the channel its summary goes to, the transcript
(downloaded with the delivery's token), then `start_task` with the task id derived from the
delivery, so a retried dispatch finds the task it started. The task's context is the
`post_to` channel's — its poster posts the summary there as a new message, its memory scope
and its budget are that channel's — and its user is `zoom:<host id>`.

An outcome under 500 is final (logged with its reason: no agent, no transcript, a refused
token); 503 has the inbox try again later (Zoom or Temporal unavailable for now).
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client
from temporalio.service import RPCError

from activities.store.agents import TRUST_CACHED_SECONDS, StoredAgent, latest_agents
from config.settings import Settings
from surfaces.limits import too_large_for_temporal
from surfaces.outcome import Outcome
from surfaces.tasks import start_task, task_id_for
from surfaces.zoom.meeting import Meeting, meeting_of, meeting_request, transcript_lines
from surfaces.zoom.transcripts import MAX_TRANSCRIPT_BYTES, FetchProblem, fetch_transcript
from workflows.types import SurfaceContext

log = logging.getLogger("openloop.zoom")


async def agent_for_meeting(pool: AsyncConnectionPool, meeting: Meeting) -> StoredAgent | None:
    """The agent that takes this meeting: one naming its host, else one taking its account.
    A miss re-reads the agents at once, so an agent applied a moment ago counts."""
    for trust in (TRUST_CACHED_SECONDS, 0.0):
        agents = [
            (agent, zoom)
            for agent in await latest_agents(pool, trust)
            if (zoom := agent.config.spec.surfaces.zoom) is not None
            and zoom.takes(meeting.host_id, meeting.host_email, meeting.account_id)
        ]
        named = [agent for agent, zoom in agents if zoom.names_host(meeting.host_id, meeting.host_email)]
        found = named or [agent for agent, _ in agents]
        if found:
            return found[0]
    return None


async def post_channel(pool: AsyncConnectionPool, agent: StoredAgent) -> tuple[str, str] | str:
    """(surface, channel id) the summary goes to, or why it has nowhere to go. A Slack
    `#name` is found among the names recorded when the agent's channels were resolved."""
    surfaces = agent.config.spec.surfaces
    target = surfaces.zoom_target()
    if target is None:
        return "the agent has no channel to post the summary in (spec.surfaces.zoom.post_to)"
    surface, written = target
    bound = list(surfaces.slack.channels if surface == "slack" and surfaces.slack else [])
    bound += list(surfaces.discord.channels if surface == "discord" and surfaces.discord else [])
    if written in bound:
        return surface, written
    if surface == "slack" and written.startswith("#"):
        async with pool.connection() as conn:
            cursor = await conn.cursor(row_factory=dict_row).execute(
                "SELECT channel_id FROM slack_channel_names WHERE name = %s OR previous_name = %s",
                (written[1:], written[1:]),
            )
            ids = [str(row["channel_id"]) for row in await cursor.fetchall()]
        found = next((channel for channel in ids if channel in bound), None)
        if found is not None:
            return surface, found
    return (
        f"post_to channel {written} is not one of the agent's {surface} channels by id; "
        "apply the agent again (names are resolved then) or write the channel id"
    )


class ZoomDispatcher:
    """Hands recorded deliveries to tasks; one per app, with its Temporal client."""

    def __init__(self, settings: Settings, temporal: Client, pool: AsyncConnectionPool) -> None:
        self.settings = settings
        self.temporal = temporal
        self.pool = pool

    async def handle(self, payload: dict[str, Any]) -> Outcome:
        try:
            meeting = meeting_of(payload)
        except ValueError as exc:
            return _final(f"malformed delivery: {exc}")
        agent = await agent_for_meeting(self.pool, meeting)
        if agent is None:
            who = meeting.host_email or meeting.host_id
            return _final(f"no agent takes meetings of {who} (account {meeting.account_id})")
        target = await post_channel(self.pool, agent)
        if isinstance(target, str):
            return _final(f"{agent.name}: {target}")
        if meeting.download_url is None:
            return _final(f"meeting {meeting.meeting_id}: the delivery lists no TRANSCRIPT file")
        try:
            transcript = await fetch_transcript(
                meeting.download_url, meeting.download_token, self.settings.zoom_api_url
            )
        except FetchProblem as exc:
            if exc.retry:
                return Outcome(f"transcript not fetched: {exc.reason}", status=503)
            return _final(f"transcript of meeting {meeting.meeting_id} not fetched: {exc.reason}")
        note = f"cut at {MAX_TRANSCRIPT_BYTES // 1024} KiB: only its start is here" if transcript.cut else ""
        request = meeting_request(meeting, transcript_lines(transcript.text), note)
        surface, channel = target
        context = SurfaceContext(
            surface=surface,
            channel=channel,
            user=f"zoom:{meeting.host_id or meeting.host_email}",
            thread=None,  # a new message in the channel
            event_id=meeting.delivery,
        )
        task_id = task_id_for("zoom", meeting.delivery)
        try:
            _, started = await start_task(
                self.temporal, self.settings, agent, context, request, task_id=task_id
            )
        except RPCError as exc:
            too_large = too_large_for_temporal(exc)
            if too_large is not None:
                return _final(f"{task_id} not started: too large for Temporal ({too_large})")
            return Outcome(f"{task_id} not started: Temporal unavailable ({exc.status})", status=503)
        return Outcome(f"{'started' if started else 'already started'} {task_id} for {agent.name}")


def _final(note: str) -> Outcome:
    """Handled, nothing started: said in the log, not retried."""
    log.info("zoom delivery handled without a task: %s", note)
    return Outcome(note)
