"""Streaming a model's answer into its Slack thread while the model writes it.

slack-sdk's `chat_stream` helper speaks the protocol (`chat.startStream`, `chat.appendStream`,
`chat.stopStream`) and buffers text between calls. On top of it:

- The first words go out at once (the stream starts with the model's first text, led by the
  task's finished tool steps as task updates); after that appends are batched, at most one
  per `FLUSH_SECONDS` unless `BUFFER_CHARS` pile up, well inside Slack's rate tiers.
- The message's ts is stored (`answer_streams`) the moment Slack creates it. A retried model
  call first stops and deletes what its earlier attempts streamed (`remove_earlier`), so a
  thread never shows two answers; the closing reply then edits the one streamed message
  into the final text the workflow recorded.
- An answer that turns to tool calls after some text, or a model that failed and hands over
  to the next, takes its streamed message away again.
- A Slack error never fails the model call: streaming stops for this call, and the closing
  reply posts (or edits) the answer as it always has.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from psycopg_pool import AsyncConnectionPool
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.models.messages.chunk import TaskUpdateChunk
from slack_sdk.web.async_chat_stream import AsyncChatStream
from slack_sdk.web.async_client import AsyncWebClient

from activities.slack import status
from activities.slack.client import SlackNotConfigured, bot_client, error_code
from activities.slack.posting import update_progress, where
from activities.store import answer_streams
from config.settings import Settings
from workflows.types import ModelCallInput, StreamTarget, SurfaceContext, TaskStatus

log = logging.getLogger(__name__)

FLUSH_SECONDS = 1.0  # batch appends: about one call a second per stream
BUFFER_CHARS = 2000  # ...unless this much text waits
MAX_TASK_UPDATES = 10

_teams: dict[str, str] = {}  # bot token digest -> the workspace's team id (auth.test)


async def recipient_team(client: AsyncWebClient, target: StreamTarget) -> str | None:
    """The recipient's team: the target's, else the bot's own workspace (auth.test, once)."""
    if target.recipient_team:
        return target.recipient_team
    key = f"{client.base_url}|{hash(client.token)}"
    if key not in _teams:
        try:
            _teams[key] = str((await client.auth_test())["team_id"])
        except (SlackApiError, KeyError) as exc:
            log.warning("auth.test failed, streaming without a team: %s", exc)
            return None
    return _teams[key]


def finished_steps(messages: list[dict[str, Any]]) -> list[TaskUpdateChunk]:
    """The task's tool calls so far (from the prompt), as finished task updates."""
    updates = [
        TaskUpdateChunk(
            id=str(call.get("id") or index), title=status.done(status.tool_of(name)), status="complete"
        )
        for index, message in enumerate(messages)
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
        if (name := str((call.get("function") or {}).get("name") or ""))
    ]
    return updates[-MAX_TASK_UPDATES:]


async def answer_stream(
    settings: Settings,
    pool: AsyncConnectionPool,
    inp: ModelCallInput,
    messages: list[dict[str, Any]],
    attempt: int,
) -> SlackAnswerStream | None:
    """The stream for this call's answer (None when it streams nowhere, or Slack is not set
    up); a retry first removes what earlier attempts streamed."""
    if inp.stream is None:
        return None
    try:
        client = bot_client(settings)
    except SlackNotConfigured:
        return None
    if attempt > 1:
        await remove_earlier(client, pool, inp.task_id, inp.step)
    return SlackAnswerStream(client, pool, inp.task_id, inp.step, inp.stream, finished_steps(messages))


async def show_step(settings: Settings, task_id: str, target: StreamTarget, note: str) -> None:
    """What the task does now, in the thread's assistant status or else its progress message.
    Best effort: a status never fails the model call."""
    context = SurfaceContext("slack", target.channel, target.recipient_user, thread=target.thread_ts)
    try:
        client = bot_client(settings)
        if await status.set_status(client, context, f"is {note}…"):
            return
        thread, messages = await where(client, context)
        await update_progress(client, context, thread, messages, task_id, TaskStatus.RUNNING, note)
    except Exception as exc:  # noqa: BLE001 - cosmetic; the task goes on
        log.info("could not show the step of %s: %s", task_id, exc)


async def remove_earlier(client: AsyncWebClient, pool: AsyncConnectionPool, task_id: str, step: int) -> None:
    """Stop and delete what earlier attempts of this call streamed."""
    for channel, ts in await answer_streams.of_step(pool, task_id, step):
        if await _remove(client, channel, ts):
            await answer_streams.forget(pool, task_id, step, ts)


async def streamed_before(pool: AsyncConnectionPool, task_id: str, step: int) -> str | None:
    """The message an earlier attempt streamed this call's (stored) answer into."""
    found = await answer_streams.of_step(pool, task_id, step)
    return found[-1][1] if found else None


async def replace_streamed(
    client: AsyncWebClient, channel: str, streamed: list[str], text: str, tagged: dict[str, object]
) -> bool:
    """Edit the first message the answer was streamed into so it reads `text` (tagged as the
    reply, so a retried post finds it) and delete the others (a continued answer's earlier
    parts). False when nothing was streamed or the message is gone: post instead."""
    if not streamed:
        return False
    for ts in streamed[1:]:
        await _remove(client, channel, ts)
    try:
        await client.chat_update(channel=channel, ts=streamed[0], text=text, metadata=tagged)
        return True
    except SlackApiError as exc:
        if error_code(exc) not in ("message_not_found", "cant_update_message", "edit_window_closed"):
            raise
        log.warning(
            "the streamed answer %s could not be edited (%s): posting it", streamed[0], error_code(exc)
        )
        return False


async def _remove(client: AsyncWebClient, channel: str, ts: str) -> bool:
    """Stop a streamed message and delete it; False when it may still be there."""
    try:  # a message left streaming shows as broken; one already stopped refuses, as it should
        await client.chat_stopStream(channel=channel, ts=ts)
    except SlackApiError as exc:
        log.info("stopping streamed message %s: %s", ts, error_code(exc))
    try:
        await client.chat_delete(channel=channel, ts=ts)
        return True
    except SlackApiError as exc:
        log.warning("could not delete streamed message %s: %s", ts, error_code(exc))
        return error_code(exc) == "message_not_found"


class SlackAnswerStream:
    """One model call's answer, streamed into its thread (the model activity's sink)."""

    def __init__(
        self,
        client: AsyncWebClient,
        pool: AsyncConnectionPool,
        task_id: str,
        step: int,
        target: StreamTarget,
        steps: list[TaskUpdateChunk],
    ) -> None:
        self.client = client
        self.pool = pool
        self.task_id = task_id
        self.step = step
        self.target = target
        self.steps = steps
        self.ts: str | None = None
        self._stream: AsyncChatStream | None = None
        self._broken = False  # Slack refused: no more calls this time
        self._last_flush = 0.0

    async def text(self, delta: str) -> None:
        if self._broken or not delta:
            return
        try:
            if self._stream is None:
                team = await recipient_team(self.client, self.target)
                self._stream = await self.client.chat_stream(
                    channel=self.target.channel,
                    thread_ts=self.target.thread_ts,
                    recipient_user_id=self.target.recipient_user,
                    recipient_team_id=team,
                    buffer_size=BUFFER_CHARS,
                )
            if self._stream.ts is None and self.steps:  # the finished steps lead the answer
                await self._stream.append(chunks=self.steps)
            due = self._stream.ts is None or time.monotonic() - self._last_flush >= FLUSH_SECONDS
            # Passing chunks (even none) makes the helper flush its buffer now.
            if await self._stream.append(markdown_text=delta, chunks=[] if due else None) is not None:
                self._last_flush = time.monotonic()
            await self._remember()
        except (SlackApiError, SlackRequestError) as exc:
            await self._give_up(exc)

    async def finish(self) -> str | None:
        """Stop the stream (the rest of the buffer goes with it); the message's ts, if any."""
        if self._stream is not None and not self._broken:
            try:
                await self._stream.stop()
            except (SlackApiError, SlackRequestError) as exc:
                await self._give_up(exc)
            await self._remember()
        return self.ts

    async def discard(self) -> None:
        """Take back what was streamed (tool calls followed, or the model failed): a later
        text starts a new stream."""
        if self.ts is not None and await _remove(self.client, self.target.channel, self.ts):
            await answer_streams.forget(self.pool, self.task_id, self.step, self.ts)
        self.ts, self._stream, self._last_flush = None, None, 0.0

    async def _remember(self) -> None:
        if self.ts is None and self._stream is not None and self._stream.ts:
            self.ts = self._stream.ts
            await answer_streams.started(self.pool, self.task_id, self.step, self.target.channel, self.ts)

    async def _give_up(self, exc: Exception) -> None:
        code = error_code(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
        log.warning(
            "streaming the answer of %s into Slack stopped (%s); it is posted instead", self.task_id, code
        )
        self._broken = True
        if self._stream is not None and self._stream.ts:
            await self._remember()
            try:  # leave no message stuck "streaming"; the closing reply edits it
                await self.client.chat_stopStream(channel=self.target.channel, ts=self._stream.ts)
            except SlackApiError:
                pass
