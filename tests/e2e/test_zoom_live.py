"""Opt-in: a real Zoom transcript through the download and the reading a Zoom task starts with.

Runs only with ZOOM_LIVE_DOWNLOAD_URL (the TRANSCRIPT file's `download_url`) and
ZOOM_LIVE_DOWNLOAD_TOKEN (a current download token for it), both from a real meeting:
- from a `recording.transcript_completed` delivery (`download_token` at the top,
  `payload.object.recording_files[]` with `file_type` TRANSCRIPT): the one OpenLoop recorded
  (`surface_inbox`, surface `zoom`, kept a week) or the one Zoom's webhook event log shows; its
  token lasts 24 hours;
- or from `GET https://api.zoom.us/v2/meetings/{meeting id or uuid}/recordings
  ?include_fields=download_access_token` with an OAuth token holding a recording read scope:
  `download_access_token`, and the TRANSCRIPT entry's `download_url`.
It downloads the file with `surfaces.zoom.transcripts.fetch_transcript`, as the dispatcher does,
reads it with `transcript_lines`, and checks that a wrong token is refused for good. It only
reads. OPENLOOP_ZOOM_API_URL names Zoom's host when it is not https://zoom.us.
"""

from __future__ import annotations

import os
import re

import pytest

from surfaces.zoom.meeting import transcript_lines
from surfaces.zoom.transcripts import FetchProblem, fetch_transcript

URL = os.environ.get("ZOOM_LIVE_DOWNLOAD_URL")
TOKEN = os.environ.get("ZOOM_LIVE_DOWNLOAD_TOKEN")
ZOOM_URL = os.environ.get("OPENLOOP_ZOOM_API_URL", "https://zoom.us")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (URL and TOKEN), reason="set ZOOM_LIVE_DOWNLOAD_URL and ZOOM_LIVE_DOWNLOAD_TOKEN to run"
    ),
]

# In the file itself: a cue line naming who speaks, as Zoom writes it ("Alice Smith: text").
SPOKEN = re.compile(r"^([^:<>\n]{1,80}):\s+\S")
TIMING = re.compile(r"\d{2}:\d{2}[.,]\d{3}\s+-->")


def speakers_in(vtt: str) -> set[str]:
    """Who the file's cues name, read plainly: the first text row after each timing."""
    found: set[str] = set()
    after_timing = False
    for row in vtt.splitlines():
        if after_timing and (named := SPOKEN.match(row.strip())):
            found.add(named[1].strip())
        after_timing = bool(TIMING.search(row))
    return found


async def test_a_real_transcript_reads_as_speaker_lines() -> None:
    assert URL is not None and TOKEN is not None
    transcript = await fetch_transcript(URL, TOKEN, ZOOM_URL)
    vtt = transcript.text.lstrip("\ufeff")
    assert vtt.startswith("WEBVTT"), f"Zoom sent something other than WebVTT: {vtt[:200]!r}"

    lines = transcript_lines(transcript.text)
    assert lines, "the transcript reads as no lines at all"
    for line in lines:  # no cue number, timing or header reaches the model
        assert line.strip() == line and line, line
        assert not TIMING.search(line) and not line.isdigit() and not line.startswith("WEBVTT"), line
    speakers_in_lines = {m[1].strip() for line in lines if (m := SPOKEN.match(line))}
    assert speakers_in_lines, f"no 'Speaker: text' line among {lines[:3]}"
    assert speakers_in(vtt) <= speakers_in_lines, speakers_in(vtt) - speakers_in_lines


async def test_a_wrong_token_is_refused_for_good() -> None:
    assert URL is not None and TOKEN is not None
    try:
        got = await fetch_transcript(URL, TOKEN + "tampered", ZOOM_URL)
    except FetchProblem as exc:
        assert not exc.retry, f"a wrong token would be retried: {exc.reason}"
    else:
        pytest.fail(f"a wrong token was answered with {got.text[:200]!r}, taken as the transcript")
