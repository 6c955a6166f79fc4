"""POST /zoom/webhooks: verify, answer the URL validation, record a transcript, ack. Nothing more.

Zoom wants an answer within 3 seconds and sends a delivery again when it gets none (or a
non-2xx). So the handler checks the signature (`surfaces.zoom.signature`; the body is bounded
by `surfaces.limits`), answers `endpoint.url_validation`, and records a
`recording.transcript_completed` in the shared inbox (`SurfaceInbox("zoom")`) under its
delivery id before the 200: a redelivery records nothing and starts nothing. The inbox's
dispatcher (`surfaces.zoom.dispatch`) downloads the transcript and starts the task after the
ack. Any other event is acknowledged and ignored.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from psycopg_pool import AsyncConnectionPool

from activities.store.db import get_pool
from surfaces.background import add_background
from surfaces.inbox import Handler, SurfaceInbox
from surfaces.outcome import Outcome
from surfaces.zoom import signature
from surfaces.zoom.dispatch import ZoomDispatcher
from surfaces.zoom.meeting import TRANSCRIPT_EVENT, URL_VALIDATION_EVENT, delivery_id

log = logging.getLogger("openloop.zoom")

PATH = "/zoom/webhooks"


def _answer(code: int, **body: Any) -> JSONResponse:
    return JSONResponse(body, status_code=code)


def register(app: FastAPI) -> None:
    @app.post(PATH)
    async def zoom_webhooks(request: Request) -> JSONResponse:
        secret = request.app.state.settings.zoom_webhook_secret_token
        if secret is None:
            return _answer(503, error="ZOOM_WEBHOOK_SECRET_TOKEN is not set; refusing unsigned webhooks")
        key = secret.get_secret_value().encode()
        body = await request.body()
        refused = signature.refusal(
            key,
            request.headers.get("x-zm-request-timestamp"),
            body,
            request.headers.get("x-zm-signature"),
            time.time(),
        )
        if refused is not None:
            log.warning("zoom delivery refused: %s", refused)
            return _answer(401, error=refused)
        try:
            payload = json.loads(body)
        except ValueError:
            return _answer(400, error="the body is not JSON")
        if not isinstance(payload, dict):
            return _answer(400, error="the body is not a JSON object")
        event = str(payload.get("event") or "")
        if event == URL_VALIDATION_EVENT:
            inner = payload.get("payload")
            answer = signature.validation_answer(
                key, inner.get("plainToken") if isinstance(inner, dict) else None
            )
            if answer is None:
                return _answer(400, error="payload.plainToken is missing or not a plain token")
            return JSONResponse(answer)
        if event != TRANSCRIPT_EVENT:
            log.info("zoom event %r ignored: only %s is handled", event, TRANSCRIPT_EVENT)
            return _answer(200, status="ignored", reason=f"event {event!r} is not handled")
        try:
            delivery = delivery_id(payload)
        except ValueError as exc:
            return _answer(400, error=f"malformed {event} payload: {exc}")
        if not request.app.state.settings.database_url:
            return _answer(503, error="no database to record the delivery in")
        try:
            added = await inbox_for(request.app).record(delivery, payload)
        except Exception:  # noqa: BLE001 - not recorded: Zoom sends it again, nothing is lost
            log.exception("zoom delivery %s not recorded", delivery)
            return _answer(503, error="not recorded; send it again")
        return _answer(200, status="recorded" if added else "duplicate", delivery=delivery)

    if app.state.settings.database_url:  # without a database nothing can be recorded either
        add_background(app, lambda stop: inbox_for(app).run(stop))


def inbox_for(app: FastAPI) -> SurfaceInbox:
    """The app's Zoom inbox: it hands recorded deliveries to the dispatcher once there is a
    Temporal connection."""
    found: SurfaceInbox | None = getattr(app.state, "zoom_inbox", None)
    if found is not None:
        return found
    settings = app.state.settings

    async def pool() -> AsyncConnectionPool:
        return await get_pool(settings.require_database_url(), checked=False)

    def handler() -> Handler | None:
        temporal = app.state.temporal
        if temporal is None:
            return None

        async def handle(payload: dict[str, Any]) -> Outcome:
            return await ZoomDispatcher(settings, temporal, await pool()).handle(payload)

        return handle

    inbox = SurfaceInbox("zoom", pool, handler)
    app.state.zoom_inbox = inbox
    return inbox
