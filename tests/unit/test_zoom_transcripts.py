"""Downloading a transcript from (the fake) Zoom as Zoom documents it: the delivery's
download token as a bearer token, the redirect followed; a refused token or a missing file is
final, a 503 is worth another try, a transcript over the cap is cut at a line."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from surfaces.zoom.transcripts import MAX_TRANSCRIPT_BYTES, FetchProblem, fetch_transcript
from tests.fakes.zoom_api import FakeZoom

VTT = "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nAlice: hello\n"


@pytest.fixture
def zoom() -> Iterator[FakeZoom]:
    with FakeZoom() as server:
        yield server


async def test_the_download_token_opens_the_transcript(zoom: FakeZoom) -> None:
    url, token = zoom.add_transcript(VTT)
    found = await fetch_transcript(url, token, zoom.base_url)
    assert found.text == VTT and not found.cut
    assert [(d.authorization, d.status) for d in zoom.downloads] == [(f"Bearer {token}", 302)]


async def test_a_wrong_token_or_a_missing_file_is_final(zoom: FakeZoom) -> None:
    url, _ = zoom.add_transcript(VTT)
    with pytest.raises(FetchProblem, match="refused the download token") as refused:
        await fetch_transcript(url, "eyJ-not-it", zoom.base_url)
    assert not refused.value.retry
    with pytest.raises(FetchProblem, match="gone") as gone:
        await fetch_transcript(f"{zoom.base_url}/rec/download/nothing", "t", zoom.base_url)
    assert not gone.value.retry


async def test_zoom_failing_for_now_is_retried(zoom: FakeZoom) -> None:
    url, token = zoom.add_transcript(VTT)
    zoom.fail_next(1)
    with pytest.raises(FetchProblem, match="503") as failed:
        await fetch_transcript(url, token, zoom.base_url)
    assert failed.value.retry
    assert (await fetch_transcript(url, token, zoom.base_url)).text == VTT


async def test_a_url_off_zoom_is_never_fetched(zoom: FakeZoom) -> None:
    url, token = zoom.add_transcript(VTT)
    with pytest.raises(FetchProblem, match="not on") as refused:
        await fetch_transcript(url, token, "https://zoom.us")
    assert not refused.value.retry and zoom.downloads == []


async def test_a_transcript_over_the_cap_is_cut_at_a_line(zoom: FakeZoom) -> None:
    cue = "00:00:01.000 --> 00:00:02.000\nAlice: " + "x" * 90 + "\n\n"
    url, token = zoom.add_transcript("WEBVTT\n\n" + cue * (MAX_TRANSCRIPT_BYTES // len(cue) + 50))
    found = await fetch_transcript(url, token, zoom.base_url)
    assert found.cut and len(found.text.encode()) <= MAX_TRANSCRIPT_BYTES and found.text.endswith("\n")


async def test_a_sign_in_page_answered_with_200_is_never_taken_for_the_transcript(zoom: FakeZoom) -> None:
    url, token = zoom.add_transcript("<!doctype html><html><body>Sign in to Zoom</body></html>")
    with pytest.raises(FetchProblem, match="WebVTT") as refused:
        await fetch_transcript(url, token, zoom.base_url)
    assert not refused.value.retry
    with_bom, bom_token = zoom.add_transcript("\ufeff" + VTT)
    assert (await fetch_transcript(with_bom, bom_token, zoom.base_url)).text.endswith("Alice: hello\n")
