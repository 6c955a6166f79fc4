"""The fake Slack Web API's methods for agents: streamed messages and assistant thread status.

`chat.startStream` / `chat.appendStream` / `chat.stopStream` and `assistant.threads.setStatus`
as Slack answers them: a streamed message is a bot reply in the thread whose text grows with
each `markdown_text` chunk (task and plan updates are kept apart, in `task_updates`); a
message no longer streaming refuses appends with `message_not_in_streaming_state`; outside a
DM a stream needs `recipient_team_id` and `recipient_user_id`. A workspace without the AI
features answers both with the error a test chooses (`not_allowed_token_type`,
`missing_scope` with `needed`/`provided`, `feature_not_enabled`). Rate limits (HTTP 429 with
Retry-After) come from `FakeSlack.rate_limit`, as for every method.

`FakeSlack._handle` calls `handler` for methods it does not define itself; every handler
runs with the fake's lock held.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.slack_api import FakeSlack

Handler = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Stream:
    channel: str
    ts: str
    recipient_user: str | None
    recipient_team: str | None
    streaming: bool = True
    appends: int = 0
    started_at: float = field(default_factory=time.monotonic)
    first_text_at: float | None = None  # when the first text arrived (for the bench)


@dataclass
class StatusChange:
    channel: str
    thread_ts: str
    status: str
    at: float = field(default_factory=time.monotonic)


class SlackStreaming:
    """The agent methods of one `FakeSlack`, and what tests read back."""

    def __init__(self, slack: FakeSlack) -> None:
        self._slack = slack
        self.streams: dict[tuple[str, str], Stream] = {}
        self.task_updates: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.statuses: list[StatusChange] = []
        self._refusal: dict[str, Any] | None = None

    # Test controls (call with no lock held; they take the fake's) ---------------------------

    def disable_ai_features(self, error: str = "feature_not_enabled") -> None:
        """Answer every agent method with `error`, as a workspace without the AI features does."""
        body: dict[str, Any] = {"ok": False, "error": error}
        if error == "missing_scope":
            body |= {"needed": "assistant:write", "provided": "chat:write,reactions:write"}
        with self._slack._lock:
            self._refusal = body

    def status_history(self, channel: str, thread_ts: str) -> list[str]:
        with self._slack._lock:
            return [s.status for s in self.statuses if (s.channel, s.thread_ts) == (channel, thread_ts)]

    def all_streams(self) -> list[Stream]:
        with self._slack._lock:
            return list(self.streams.values())

    def stream_of(self, channel: str, ts: str) -> Stream | None:
        with self._slack._lock:
            return self.streams.get((channel, ts))

    # Dispatch ------------------------------------------------------------------------------

    def handler(self, method: str) -> Handler | None:
        handlers: dict[str, Handler] = {
            "chat.startStream": self._start,
            "chat.appendStream": self._append,
            "chat.stopStream": self._stop,
            "assistant.threads.setStatus": self._set_status,
        }
        return handlers.get(method)

    def _start(self, args: dict[str, Any]) -> dict[str, Any]:
        if self._refusal is not None:
            return dict(self._refusal)
        channel, thread = str(args.get("channel") or ""), str(args.get("thread_ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not thread:
            return {"ok": False, "error": "invalid_arguments"}
        direct = channel.startswith("D")
        if not direct and not args.get("recipient_team_id"):
            return {"ok": False, "error": "missing_recipient_team_id"}
        if not direct and not args.get("recipient_user_id"):
            return {"ok": False, "error": "missing_recipient_user_id"}
        slack = self._slack
        if slack._find(channel, thread) is None:
            return {"ok": False, "error": "message_not_found"}
        ts = slack._store(channel, {**slack._bot_fields(), "text": ""}, thread)
        stream = Stream(channel, ts, args.get("recipient_user_id"), args.get("recipient_team_id"))
        self.streams[(channel, ts)] = stream
        self._take(stream, args)
        return {"ok": True, "channel": channel, "ts": ts}

    def _append(self, args: dict[str, Any]) -> dict[str, Any]:
        stream, problem = self._open_stream(args)
        if stream is None:
            return problem
        stream.appends += 1
        self._take(stream, args)
        return {"ok": True, "channel": stream.channel, "ts": stream.ts}

    def _stop(self, args: dict[str, Any]) -> dict[str, Any]:
        stream, problem = self._open_stream(args)
        if stream is None:
            return problem
        self._take(stream, args)
        message = self._slack._find(stream.channel, stream.ts)
        assert message is not None
        for key in ("blocks", "metadata"):
            if args.get(key):
                message[key] = _json(args[key])
        stream.streaming = False
        return {"ok": True, "channel": stream.channel, "ts": stream.ts, "message": dict(message)}

    def _set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        if self._refusal is not None:
            return dict(self._refusal)
        channel, thread = str(args.get("channel_id") or ""), str(args.get("thread_ts") or "")
        if not channel or not thread or "status" not in args:
            return {"ok": False, "error": "invalid_arguments"}
        self.statuses.append(StatusChange(channel, thread, str(args["status"])))
        return {"ok": True}

    # Helpers -------------------------------------------------------------------------------

    def _open_stream(self, args: dict[str, Any]) -> tuple[Stream | None, dict[str, Any]]:
        if self._refusal is not None:
            return None, dict(self._refusal)
        key = (str(args.get("channel") or ""), str(args.get("ts") or ""))
        stream = self.streams.get(key)
        if stream is None or self._slack._find(*key) is None:
            return None, {"ok": False, "error": "message_not_found"}
        if not stream.streaming:
            return None, {"ok": False, "error": "message_not_in_streaming_state"}
        return stream, {}

    def _take(self, stream: Stream, args: dict[str, Any]) -> None:
        """Add the call's markdown text and chunks to the streamed message."""
        message = self._slack._find(stream.channel, stream.ts)
        if message is None:
            return
        texts = [str(args["markdown_text"])] if args.get("markdown_text") else []
        for chunk in _json(args.get("chunks")) or []:
            if chunk.get("type") == "markdown_text":
                texts.append(str(chunk.get("text") or ""))
            else:
                self.task_updates.setdefault((stream.channel, stream.ts), []).append(chunk)
        if texts and stream.first_text_at is None:
            stream.first_text_at = time.monotonic()
        message["text"] = str(message.get("text") or "") + "".join(texts)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
