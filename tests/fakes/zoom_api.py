"""A local stand-in for Zoom's side of a meeting's transcript, for tests.

A real HTTP server on 127.0.0.1 (aiohttp, in its own thread) that serves recording files as
Zoom does: `GET /rec/download/<file id>` with `Authorization: Bearer <download_token>` (401
without the right token, 404 for an unknown file) redirects to where the file is stored,
which serves the WebVTT. It can answer 503 the next N times, and records every download.

The helpers build what Zoom sends: a `recording.transcript_completed` delivery in the shape of
Zoom's docs (`event`, `event_ts`, `download_token`, `payload.account_id`, `payload.object` with
the meeting and its `recording_files`), an `endpoint.url_validation` challenge, and the
headers Zoom signs them with (`x-zm-request-timestamp`, `x-zm-signature` = `v0=` + hex
HMAC-SHA256 of `v0:{timestamp}:{body}`), plus forged and stale variants.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.thread_server import ThreadServer


@dataclass
class Download:
    file_id: str
    authorization: str
    status: int


class FakeZoom:
    def __init__(self) -> None:
        self.files: dict[str, tuple[str, str]] = {}  # file id -> (download token, vtt)
        self.downloads: list[Download] = []
        self._failures = 0
        self._server = ThreadServer("fake-zoom")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def port(self) -> int:
        return self._server.port

    def start(self) -> FakeZoom:
        self._server.start(self._app)
        return self

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/rec/download/{file_id}", self._download)
        app.router.add_get("/storage/{file_id}", self._stored)
        return app

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> FakeZoom:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Test controls -----------------------------------------------------------------------

    def add_transcript(self, vtt: str) -> tuple[str, str]:
        """Store a transcript; returns (its download_url, the download_token that opens it)."""
        file_id = secrets.token_urlsafe(12)
        token = "eyJ" + secrets.token_urlsafe(24)
        self.files[file_id] = (token, vtt)
        return f"{self.base_url}/rec/download/{file_id}", token

    def fail_next(self, times: int) -> None:
        """Answer the next `times` downloads with 503, as Zoom does when it is struggling."""
        self._failures = times

    # Zoom's side -------------------------------------------------------------------------

    async def _download(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        authorization = request.headers.get("Authorization", "")
        found = self.files.get(file_id)
        status = 302
        if self._failures > 0:
            self._failures -= 1
            status = 503
        elif found is None:
            status = 404
        elif not hmac.compare_digest(authorization, f"Bearer {found[0]}"):
            status = 401
        self.downloads.append(Download(file_id, authorization, status))
        if status != 302:
            return web.json_response({"code": status, "message": "refused"}, status=status)
        raise web.HTTPFound(f"/storage/{file_id}?sig={secrets.token_hex(8)}")

    async def _stored(self, request: web.Request) -> web.Response:
        found = self.files.get(request.match_info["file_id"])
        if found is None:
            return web.Response(status=404)
        return web.Response(text=found[1], content_type="text/vtt")


# What Zoom sends -------------------------------------------------------------------------------


def transcript_completed(
    download_url: str,
    download_token: str,
    *,
    host_id: str = "z8yCxjabcdEFGHfp8uQ",
    host_email: str = "alice@example.com",
    account_id: str = "EabCDEFghiJKLmno",
    topic: str = "Weekly platform sync",
    uuid: str = "4444AAAiAAAAAiAiAiiAii==",
    event_ts: int | None = None,
) -> dict[str, Any]:
    """A `recording.transcript_completed` delivery, shaped as Zoom's docs show it."""
    return {
        "event": "recording.transcript_completed",
        "event_ts": event_ts if event_ts is not None else int(time.time() * 1000),
        "download_token": download_token,
        "payload": {
            "account_id": account_id,
            "object": {
                "uuid": uuid,
                "id": 85746065432,
                "account_id": account_id,
                "host_id": host_id,
                "host_email": host_email,
                "topic": topic,
                "type": 2,
                "start_time": "2026-11-26T15:00:00Z",
                "timezone": "Europe/Berlin",
                "duration": 45,
                "total_size": 4821,
                "recording_count": 1,
                "share_url": "https://zoom.us/rec/share/abcdEFgh",
                "recording_files": [
                    {
                        "id": "ed6c2f27-2ae7-42f4-b3d0-835b493e4fa8",
                        "meeting_id": uuid,
                        "recording_start": "2026-11-26T15:00:05Z",
                        "recording_end": "2026-11-26T15:44:51Z",
                        "file_type": "TRANSCRIPT",
                        "file_extension": "VTT",
                        "file_size": 4821,
                        "play_url": "https://zoom.us/rec/play/Qg75t7xZBtEbAkjdlgbfdngBBBB",
                        "download_url": download_url,
                        "status": "completed",
                        "recording_type": "audio_transcript",
                    }
                ],
            },
        },
    }


def url_validation(plain_token: str = "qgg8vlvZRS6UYooatFL8Aw") -> dict[str, Any]:
    return {
        "event": "endpoint.url_validation",
        "event_ts": int(time.time() * 1000),
        "payload": {"plainToken": plain_token},
    }


def body_of(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def signed(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """The headers Zoom sends `body` with."""
    stamp = str(timestamp if timestamp is not None else int(time.time()))
    digest = hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return {
        "content-type": "application/json",
        "x-zm-request-timestamp": stamp,
        "x-zm-signature": f"v0={digest}",
    }


def forged(body: bytes) -> dict[str, str]:
    """Signed with a secret that is not the app's."""
    return signed(body, "not-the-secret-token")


def stale(body: bytes, secret: str, age_seconds: int = 600) -> dict[str, str]:
    """Correctly signed, but long ago: a replay."""
    return signed(body, secret, int(time.time()) - age_seconds)
