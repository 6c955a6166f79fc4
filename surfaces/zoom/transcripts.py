"""Downloading a meeting's transcript with the delivery's download token (httpx).

Zoom's documented way: GET the file's `download_url` with `Authorization: Bearer
<download_token>`; it redirects to where the file is stored. Only URLs on Zoom's host
(`OPENLOOP_ZOOM_API_URL`, default https://zoom.us, or a subdomain such as us06web.zoom.us)
are fetched: the payload names the URL, and the server must not be pointed anywhere else.
At most `MAX_TRANSCRIPT_BYTES` are read; a longer transcript is cut at a line, and says so.

What went wrong decides what the inbox does: Zoom (or the network) failing for now is
retried (`FetchProblem.retry`); a refused token (401/403, it lasts 24 hours), a file that is
gone (404/410) or a URL elsewhere is not.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

MAX_TRANSCRIPT_BYTES = 1024 * 1024
TIMEOUT = httpx.Timeout(30.0, connect=5.0)
MAX_REDIRECTS = 5
# The whole download, redirect included: under the inbox's 30 s lease on the row it serves.
DEADLINE_SECONDS = 25.0


@dataclass(frozen=True)
class Transcript:
    text: str
    cut: bool  # longer than MAX_TRANSCRIPT_BYTES: only the start is here


class FetchProblem(Exception):
    def __init__(self, reason: str, *, retry: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry


def on_zoom(url: str, zoom_url: str) -> bool:
    """Whether `url` is on Zoom's host (or a subdomain), with its scheme."""
    target, zoom = urlsplit(url), urlsplit(zoom_url)
    host, home = (target.hostname or "").lower(), (zoom.hostname or "").lower()
    same_place = host == home and target.port == zoom.port
    return bool(home) and target.scheme == zoom.scheme and (same_place or host.endswith("." + home))


async def fetch_transcript(url: str, token: str, zoom_url: str) -> Transcript:
    """The transcript at `url`, read with the download token. Raises FetchProblem."""
    if not on_zoom(url, zoom_url):
        raise FetchProblem(f"the download_url is not on {zoom_url}; not fetched", retry=False)
    if not token:
        raise FetchProblem("the delivery has no download_token", retry=False)
    try:
        return await asyncio.wait_for(_download(url, token), DEADLINE_SECONDS)
    except TimeoutError:
        raise FetchProblem("Zoom did not send the transcript in time", retry=True) from None


async def _download(url: str, token: str) -> Transcript:
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with (
            httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=True, max_redirects=MAX_REDIRECTS) as http,
            http.stream("GET", url, headers=headers) as response,
        ):
            _check(response.status_code)
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_TRANSCRIPT_BYTES:
                    break
    except httpx.TimeoutException:
        raise FetchProblem("Zoom did not send the transcript in time", retry=True) from None
    except httpx.TooManyRedirects:
        raise FetchProblem(f"more than {MAX_REDIRECTS} redirects", retry=False) from None
    except httpx.TransportError as exc:
        raise FetchProblem(f"could not reach Zoom ({type(exc).__name__})", retry=True) from None
    if not bytes(body[:16]).lstrip(b"\xef\xbb\xbf \r\n").startswith(b"WEBVTT"):
        # A refused link may answer 200 with a sign-in page: never summarise that.
        raise FetchProblem("Zoom did not send a WebVTT transcript (a sign-in page?)", retry=False)
    if len(body) <= MAX_TRANSCRIPT_BYTES:
        return Transcript(body.decode("utf-8", errors="replace"), cut=False)
    end = body.rfind(b"\n", 0, MAX_TRANSCRIPT_BYTES) + 1 or MAX_TRANSCRIPT_BYTES  # at a line's end
    return Transcript(bytes(body[:end]).decode("utf-8", errors="replace"), cut=True)


def _check(status: int) -> None:
    if status < 300:
        return
    if status in (401, 403):
        raise FetchProblem(f"Zoom refused the download token ({status}); it lasts 24 hours", retry=False)
    if status in (404, 410):
        raise FetchProblem(f"the transcript is gone ({status})", retry=False)
    if status == 429 or status >= 500:
        raise FetchProblem(f"Zoom answered {status}", retry=True)
    raise FetchProblem(f"Zoom answered {status}", retry=False)
