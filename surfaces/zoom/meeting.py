"""What a `recording.transcript_completed` delivery says, its WebVTT transcript as lines, and
the request the task starts with. Pure: no I/O, unit-tested.

Zoom's payload (its documented shape): `event`, `event_ts` (ms), `download_token` (a bearer
token for the recording files, valid for 24 hours), `payload.account_id` and
`payload.object` — the meeting instance (`uuid`, `id`, `host_id`, `host_email`, `topic`,
`start_time`, `duration` in minutes) with its `recording_files[]`, the transcript being the
one whose `file_type` is `TRANSCRIPT` (a `.vtt` at its `download_url`).

The topic and the transcript are written by the people in the meeting: they reach the model
inside untrusted-data blocks, as data to summarise, never as instructions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workflows.untrusted import wrap_untrusted

TRANSCRIPT_EVENT = "recording.transcript_completed"
URL_VALIDATION_EVENT = "endpoint.url_validation"
MAX_TOPIC_CHARS = 300
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,80}$")
_TIMING = re.compile(r"^\s*(\d{1,2}:)?\d{2}:\d{2}[.,]\d{3}\s+-->\s+")
_VOICE = re.compile(r"^<v(?:\.[\w.-]+)?\s+([^>]+)>(.*)$", re.S)  # <v Alice>text (the WebVTT standard)
_SPEAKER = re.compile(r"^([^:<>\n]{1,80}):\s+(.*)$", re.S)  # "Alice Smith: text" (Zoom's own)
_TAGS = re.compile(r"</?[a-z](?:[^>]{0,80})?>|<\d{2}:\d{2}[^>]{0,20}>", re.I)


@dataclass(frozen=True)
class Meeting:
    """The meeting instance a transcript belongs to, and where its transcript is."""

    delivery: str  # stable across Zoom's retries: the inbox key and the task id's source
    uuid: str
    meeting_id: str
    host_id: str
    host_email: str
    account_id: str
    topic: str
    start_time: str
    duration_minutes: int | None
    download_url: str | None  # the TRANSCRIPT file's, None when the delivery has none
    download_token: str


def delivery_id(payload: dict[str, Any]) -> str:
    """The meeting instance's uuid and the event's time: what Zoom sends again on a retry.
    Kept as is when short and plain, else hashed (a uuid has `/`, `+` and `=`)."""
    found = _object(payload)
    uuid, event_ts = str(found.get("uuid") or ""), str(payload.get("event_ts") or "")
    if not uuid or not event_ts:
        raise ValueError("payload.object.uuid and event_ts are required")
    raw = f"{uuid}:{event_ts}"
    return raw if _SAFE_ID.match(raw) else "zm-" + hashlib.sha256(raw.encode()).hexdigest()[:40]


def _object(payload: dict[str, Any]) -> dict[str, Any]:
    inner = payload.get("payload")
    found = inner.get("object") if isinstance(inner, dict) else None
    if not isinstance(found, dict):
        raise ValueError("payload.object (the meeting) is missing")
    return found


def meeting_of(payload: dict[str, Any]) -> Meeting:
    """The meeting of a transcript_completed delivery. Raises ValueError naming what is missing."""
    found = _object(payload)
    inner = payload.get("payload") or {}
    files = found.get("recording_files") or []
    transcript = next(
        (f for f in files if isinstance(f, dict) and str(f.get("file_type", "")).upper() == "TRANSCRIPT"),
        None,
    )
    duration = found.get("duration")
    return Meeting(
        delivery=delivery_id(payload),
        uuid=str(found.get("uuid")),
        meeting_id=str(found.get("id") or ""),
        host_id=str(found.get("host_id") or ""),
        host_email=str(found.get("host_email") or ""),
        account_id=str(inner.get("account_id") or found.get("account_id") or ""),
        topic=" ".join(str(found.get("topic") or "").split())[:MAX_TOPIC_CHARS],
        start_time=str(found.get("start_time") or ""),
        duration_minutes=int(duration) if isinstance(duration, int | float) else None,
        download_url=str(transcript["download_url"])
        if transcript and transcript.get("download_url")
        else None,
        download_token=str(payload.get("download_token") or ""),
    )


def _cue_text(lines: list[str]) -> str:
    """A cue's text on one line: `Speaker: text`, tags (but the voice's name) removed."""
    text = " ".join(line.strip() for line in lines if line.strip())
    voice = _VOICE.match(text)
    if voice:
        text = f"{voice[1].strip()}: {voice[2]}"
    return " ".join(_TAGS.sub("", text).split())


def transcript_lines(vtt: str) -> list[str]:
    """A WebVTT transcript as `Speaker: text` lines, a speaker's consecutive cues joined.
    Cue numbers, timings, the header and NOTE/STYLE/REGION blocks are left out."""
    blocks = re.split(r"\r?\n\s*\r?\n", vtt.lstrip("\ufeff").replace("\r\n", "\n"))
    said: list[tuple[str, str]] = []
    for block in blocks:
        lines = block.split("\n")
        timing = next((i for i, line in enumerate(lines) if _TIMING.match(line)), None)
        if timing is None:  # the WEBVTT header, a NOTE, STYLE or REGION block
            continue
        text = _cue_text(lines[timing + 1 :])
        if not text:
            continue
        named = _SPEAKER.match(text)
        speaker, words = (named[1].strip(), named[2].strip()) if named else ("", text)
        if said and said[-1][0] == speaker:
            said[-1] = (speaker, f"{said[-1][1]} {words}")
        else:
            said.append((speaker, words))
    return [f"{speaker}: {words}" if speaker else words for speaker, words in said]


def _when(meeting: Meeting) -> str:
    try:
        start = datetime.fromisoformat(meeting.start_time.replace("Z", "+00:00"))
    except ValueError:
        start = None
    held = f"held {start:%Y-%m-%d %H:%M} UTC" if start and start.utcoffset() is not None else ""
    held = held or (f"held {meeting.start_time}" if meeting.start_time else "")
    length = f"{meeting.duration_minutes} min" if meeting.duration_minutes is not None else ""
    return ", ".join(part for part in (held, length) if part)


def meeting_request(meeting: Meeting, lines: list[str], note: str = "") -> str:
    """The task's request: what to do, then the topic and the transcript as data."""
    when = "; ".join(part for part in (_when(meeting), f"Zoom meeting {meeting.meeting_id}") if part)
    lines_said = f"{len(lines)} line{'s' if len(lines) != 1 else ''}"
    return "\n".join(
        [
            f"Summarise the meeting ({when}) for the channel, "
            "and save each decision to memory, one memory.save per decision.",
            "Its topic, as the host wrote it:",
            wrap_untrusted(meeting.topic or "(no topic)", "zoom:topic"),
            f"Its transcript ({lines_said}{'; ' + note if note else ''}):",
            wrap_untrusted("\n".join(lines) or "(the transcript is empty)", "zoom:transcript"),
        ]
    )
