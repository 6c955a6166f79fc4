"""POST /linear/webhooks: verify, record, ack. The dispatcher does the rest.

Linear waits 5 seconds for the answer, so the handler only checks the signature
(`Linear-Signature` over the raw body) and the payload's `webhookTimestamp`, records an
`AgentSessionEvent` in the shared inbox (`surfaces.inbox`, surface "linear") under its
`Linear-Delivery` id and answers 200. A forged, unsigned or stale delivery is answered 401 and
nothing is recorded; a redelivery finds its row and adds nothing. Bodies are bounded by
`surfaces.limits` (1 MiB). The inbox's dispatcher (`surfaces.linear.dispatch`) sends the
session's first thought and starts or steers the task right after.
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
from surfaces.linear import events
from surfaces.outcome import Outcome

log = logging.getLogger("openloop.linear")

PATH = "/linear/webhooks"


def register(app: FastAPI) -> None:
    @app.post(PATH)
    async def linear_webhooks(request: Request) -> JSONResponse:
        secret = request.app.state.settings.linear_webhook_secret
        if secret is None:
            return JSONResponse(
                {"error": "LINEAR_WEBHOOK_SECRET is not set; refusing unsigned webhooks"}, 503
            )
        body = await request.body()
        if not events.verify_signature(
            secret.get_secret_value().encode(), body, request.headers.get("Linear-Signature")
        ):
            return JSONResponse({"error": "bad or missing Linear-Signature"}, 401)
        try:
            payload = json.loads(body)
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, 400)
        if not isinstance(payload, dict):
            return JSONResponse({"error": "the body is not a JSON object"}, 400)
        if not events.fresh(payload, time.time()):
            return JSONResponse(
                {"error": f"webhookTimestamp is missing or over {events.MAX_SKEW_SECONDS} s off"}, 401
            )
        if payload.get("type") != events.EVENT_TYPE:
            return JSONResponse({"status": "ignored", "reason": f"{payload.get('type')!r} is not handled"})
        delivery = events.delivery_key(request.headers.get("Linear-Delivery"), payload)
        try:
            added = await inbox_for(request.app).record(delivery, {**payload, "_delivery": delivery})
        except Exception:
            log.exception("linear delivery %s could not be recorded", delivery)
            return JSONResponse({"error": "not recorded; deliver it again"}, 503)
        return JSONResponse({"status": "recorded" if added else "duplicate", "delivery": delivery})

    settings = app.state.settings
    if settings.linear_webhook_secret is None:
        return  # Linear is not set up: the endpoint answers 503, no dispatcher runs
    add_background(app, lambda stop: inbox_for(app).run(stop))


def inbox_for(app: FastAPI) -> SurfaceInbox:
    inbox: SurfaceInbox | None = getattr(app.state, "linear_inbox", None)
    if inbox is None:
        settings = app.state.settings

        async def pool() -> AsyncConnectionPool:
            return await get_pool(settings.require_database_url(), checked=False)

        def handler() -> Handler | None:
            from surfaces.linear.dispatch import LinearDispatcher

            temporal = app.state.temporal
            if temporal is None or not settings.database_url:
                return None

            async def handle(payload: dict[str, Any]) -> Outcome:
                dispatcher = LinearDispatcher(
                    settings, temporal, await get_pool(settings.require_database_url())
                )
                return await dispatcher.handle(payload)

            return handle

        inbox = SurfaceInbox("linear", pool, handler)
        app.state.linear_inbox = inbox
    return inbox
