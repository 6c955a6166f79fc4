"""POST /hooks/{name}: generic signed webhooks that start playbook runs.

A hook is either a registry event with `webhook: {hook: NAME, secret_env: VAR}` (the JSON
body's values become the event's fields, looked up by name) or a sensor declared with
`@sensor(webhook="/hooks/NAME", emits=...)` (its function makes the event's fields of the
body; its secret is `OPENLOOP_HOOK_SECRET_<NAME>`). Every request is signed over a timestamp,
its delivery id and the raw body with the hook's secret (`surfaces.hook_signature`); a bad,
missing or stale signature is refused with 401 and audited, and a hook whose secret is not
set refuses everything (503).

The run key is the request's signed `X-OpenLoop-Delivery`, else the body's SHA-256, so a
resent request never starts a second run. A start Temporal refuses as too large is a 413.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from temporalio.service import RPCError

from activities.playbooks.starts import Started, start_listening
from activities.store import playbooks as playbook_rows
from activities.store.db import get_pool
from activities.store.ledger import write_audit
from config.settings import Settings
from surfaces import hook_signature
from surfaces.limits import too_large_answer, too_large_for_temporal
from surfaces.playbook_events import fields_of
from surfaces.sensors import LoadedSensor, load_sensors, playbooks_dir
from workflows.message_types import AuditEvent
from workflows.playbook_types import EventType

log = logging.getLogger("openloop.hooks")

SENSOR_SECRET_PREFIX = "OPENLOOP_HOOK_SECRET_"


def sensor_secret_env(hook: str) -> str:
    return SENSOR_SECRET_PREFIX + re.sub(r"[^A-Z0-9]", "_", hook.upper())


@dataclass
class Hook:
    """What `/hooks/NAME` starts: events whose fields come from the body, or sensors."""

    name: str
    secret_env: str
    events: list[EventType]
    sensors: list[LoadedSensor]


async def find_hook(settings: Settings, sensors: list[LoadedSensor], name: str) -> Hook | None:
    events = []
    if settings.database_url:
        events = [
            event
            for event in await playbook_rows.registered_events(
                await get_pool(settings.database_url), "webhook"
            )
            if event.match.get("hook") == name
        ]
    mine = [sensor for sensor in sensors if sensor.hook == name]
    if not events and not mine:
        return None
    secret_env = str(events[0].match.get("secret_env")) if events else sensor_secret_env(name)
    return Hook(name, secret_env, events, mine)


async def _audit_refusal(settings: Settings, name: str, actor: str, reason: str) -> None:
    if not settings.database_url:
        return
    event = AuditEvent(
        task_id=f"hook:{name}", step=0, key=uuid.uuid4().hex, agent="", workspace="default",
        channel=f"/hooks/{name}", kind="webhook_refused", actor=actor, outcome=reason,
    )  # fmt: skip
    async with (await get_pool(settings.database_url)).connection() as conn:
        await write_audit(conn, event)


def _answer(code: int, **body: Any) -> JSONResponse:
    return JSONResponse(body, status_code=code)


def register(app: FastAPI) -> None:
    sensors, problems = load_sensors(playbooks_dir())
    for problem in problems:
        log.error("sensor not loaded: %s", problem)
    app.state.sensors = sensors

    @app.post("/hooks/{name}")
    async def hook(name: str, request: Request) -> JSONResponse:
        settings: Settings = request.app.state.settings
        found = await find_hook(settings, request.app.state.sensors, name)
        if found is None:
            return _answer(404, error=f"no playbook event or sensor listens on /hooks/{name}")
        secret = os.environ.get(found.secret_env)
        if not secret:
            log.error("/hooks/%s refused: %s is not set", name, found.secret_env)
            return _answer(503, error=f"{found.secret_env} is not set; refusing unsigned webhooks")
        body = await request.body()  # bounded by surfaces.limits
        delivery = request.headers.get(hook_signature.DELIVERY_HEADER)
        reason = hook_signature.problem(
            secret,
            body,
            request.headers.get(hook_signature.SIGNATURE_HEADER),
            request.headers.get(hook_signature.TIMESTAMP_HEADER),
            delivery,
        )
        if reason is not None:
            actor = request.client.host if request.client else "unknown"
            log.warning("/hooks/%s refused (401) from %s: %s", name, actor, reason)
            await _audit_refusal(settings, name, actor, reason)
            return _answer(401, error=f"bad, missing or stale signature: {reason}", how=hook_signature.HOW)
        try:
            payload = json.loads(body)
        except ValueError:
            return _answer(400, error="the body is not JSON")
        run_key = f"{name}-{delivery or hashlib.sha256(body).hexdigest()[:32]}"
        if request.app.state.temporal is None:
            return _answer(503, error="the surfaces server is not connected to Temporal yet; send it again")
        try:
            outcome = await _start(request.app, found, payload, run_key)
        except RPCError as exc:
            log.warning("/hooks/%s: playbook runs not started: %s", name, exc)
            too_large = too_large_for_temporal(exc)
            if too_large is not None:
                return too_large_answer(too_large)
            return _answer(503, error="Temporal is unavailable; send it again")
        if outcome is None:
            return _answer(200, status="ignored", reason="the sensor made no event of this request")
        if outcome.started:
            return _answer(202, status="started", playbook_runs=outcome.started)
        return _answer(200, status="duplicate", playbook_runs=outcome.duplicates)


async def _start(app: FastAPI, hook: Hook, payload: Any, run_key: str) -> Started | None:
    """Start the runs for the hook's events; None when its sensors made no event."""
    settings: Settings = app.state.settings
    pool = await get_pool(settings.require_database_url())
    made: list[tuple[str, dict[str, Any]]] = [
        (event.name, fields_of(event, payload if isinstance(payload, dict) else {})) for event in hook.events
    ]
    for sensor in hook.sensors:
        fields = await sensor.event(payload)
        if fields is not None:
            made.append((sensor.spec.emits, fields))
    if not made:
        return None
    outcome = Started()
    for event_name, fields in made:
        started = await start_listening(
            app.state.temporal, pool, settings.task_queue, event_name, fields, run_key
        )
        outcome.started += started.started
        outcome.duplicates += started.duplicates
    return outcome
