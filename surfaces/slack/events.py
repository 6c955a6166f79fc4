"""Slack over HTTP: `POST /slack/events` (Events API) and `POST /slack/interactivity`.

Both verify Slack's signature (slack-sdk's SignatureVerifier: HMAC of the raw body, and a
timestamp no older than 5 minutes) before reading anything. An event that could start or
reach a task is then recorded in the Slack inbox (one INSERT keyed by event_id) and acked;
the inbox dispatcher starts or signals the task right after, so the ack never waits on
Temporal. A click is signalled to its task before the ack. Follow-ups (a helpful reply, an
ephemeral "not allowed") run after the response.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from fastapi import BackgroundTasks, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from psycopg_pool import AsyncConnectionPool
from slack_sdk.signature import SignatureVerifier

from activities.store.db import get_pool
from surfaces import playbook_events
from surfaces.background import add_background
from surfaces.limits import too_large_for_temporal
from surfaces.outcome import Outcome
from surfaces.slack import inbox
from surfaces.slack.dispatch import SlackDispatcher
from surfaces.slack.first_sign import FirstSign

log = logging.getLogger("openloop.slack")

MAX_CLOCK_SKEW_SECONDS = 300  # what SignatureVerifier allows; named here for the log line


def register(app: FastAPI) -> None:
    @app.post("/slack/events")
    async def slack_events(request: Request) -> Response:
        body = await request.body()
        refused = _refuse_unsigned(request, body)
        if refused is not None:
            return refused
        try:
            payload = json.loads(body)
        except ValueError:
            log.warning("slack event rejected: body is not JSON")
            return _reply(400, {"ok": False, "error": "invalid_json"})
        if not isinstance(payload, dict):
            log.warning("slack event rejected: body is JSON but not an object")
            return _reply(400, {"ok": False, "error": "invalid_payload"})
        if payload.get("type") == "url_verification":
            return _reply(200, {"challenge": str(payload.get("challenge") or "")})
        # Recorded first: an outage answers "not recorded" and Slack's retry loses nothing; a
        # redelivered event is recorded once and starts each playbook's run once.
        recorded = await _record(request, payload)
        if recorded.status_code != 200:
            return recorded
        playbooks = await playbook_events.slack_event(request.app, payload)
        if playbooks is not None and playbooks.status_code >= 500:
            return playbooks  # not acked: Slack sends it again, and a run starts once
        return recorded

    @app.post("/slack/interactivity")
    async def slack_interactivity(request: Request, background: BackgroundTasks) -> Response:
        body = await request.body()
        refused = _refuse_unsigned(request, body)
        if refused is not None:
            return refused
        try:
            payload = json.loads(parse_qs(body.decode())["payload"][0])
        except (UnicodeDecodeError, KeyError, IndexError, ValueError):
            log.warning("slack interaction rejected: no JSON payload field")
            return _reply(400, {"ok": False, "error": "invalid_payload"})
        if not isinstance(payload, dict):
            log.warning("slack interaction rejected: payload is JSON but not an object")
            return _reply(400, {"ok": False, "error": "invalid_payload"})
        outcome = await _click(request, payload)
        return _ack(outcome, background)

    if app.state.settings.database_url:  # without a database nothing can be recorded either
        add_background(app, lambda stop: inbox_for(app).run(stop))


def inbox_for(app: FastAPI) -> inbox.InboxDispatcher:
    """The app's inbox dispatcher: it hands recorded events to the Slack dispatcher once
    there is a Temporal connection."""
    dispatcher: inbox.InboxDispatcher | None = getattr(app.state, "slack_inbox", None)
    if dispatcher is None:
        settings = app.state.settings

        async def pool() -> AsyncConnectionPool:
            return await get_pool(settings.require_database_url(), checked=False)

        def handler() -> inbox.Handler | None:
            slack = dispatcher_for(app)
            return slack.handle_event if slack is not None else None

        dispatcher = inbox.InboxDispatcher(pool, handler, FirstSign(settings, lambda: dispatcher_for(app)))
        app.state.slack_inbox = dispatcher
    return dispatcher


def dispatcher_for(app: FastAPI) -> SlackDispatcher | None:
    """One dispatcher per app (it caches user groups and recently seen events); None while
    the server has no Temporal connection yet."""
    temporal = app.state.temporal
    if temporal is None:
        return None
    dispatcher: SlackDispatcher | None = getattr(app.state, "slack_dispatcher", None)
    if dispatcher is None or dispatcher.temporal is not temporal:
        dispatcher = SlackDispatcher(app.state.settings, temporal)
        app.state.slack_dispatcher = dispatcher
    return dispatcher


def _refuse_unsigned(request: Request, body: bytes) -> Response | None:
    """None when Slack signed this request; else the 401 (or 503 when unconfigured)."""
    secret = request.app.state.settings.slack_signing_secret
    if secret is None:
        log.error("slack request refused: SLACK_SIGNING_SECRET is not set")
        return _reply(503, {"ok": False, "error": "slack_not_configured"})
    timestamp = request.headers.get("x-slack-request-timestamp")
    signature = request.headers.get("x-slack-signature")
    problem = _timestamp_problem(timestamp)
    if signature is None:
        problem = problem or "missing X-Slack-Signature"
    verifier = SignatureVerifier(secret.get_secret_value())
    try:
        if problem is None and not verifier.is_valid(body, timestamp, signature):
            problem = "signature does not match"
    except UnicodeDecodeError:
        problem = "body is not UTF-8, so Slack did not sign it"
    if problem is None:
        return None
    client = request.client.host if request.client else "unknown"
    log.warning("slack request to %s rejected (401) from %s: %s", request.url.path, client, problem)
    return _reply(401, {"ok": False, "error": "invalid_signature"})


def _timestamp_problem(timestamp: str | None) -> str | None:
    if timestamp is None:
        return "missing X-Slack-Request-Timestamp"
    try:
        age = time.time() - int(timestamp)
    except ValueError:
        return "X-Slack-Request-Timestamp is not a number"
    if abs(age) > MAX_CLOCK_SKEW_SECONDS:
        return f"timestamp is {int(age)} s off (more than {MAX_CLOCK_SKEW_SECONDS} s): replay?"
    return None


async def _record(request: Request, payload: dict[str, Any]) -> Response:
    """Record the event in the inbox and ack; the dispatcher takes it from there."""
    retry = request.headers.get("x-slack-retry-num") or "0"
    try:
        outcome = await inbox_for(request.app).accept(payload, int(retry) if retry.isdigit() else 0)
    except Exception:
        # Not recorded, so not acked: a 5xx makes Slack deliver the event again later.
        log.exception("slack event could not be recorded")
        return _reply(503, {"ok": False, "error": "not_recorded"})
    if outcome.status >= 400:
        log.warning("slack event rejected: %s", outcome.note)
        return _reply(outcome.status, {"ok": False, "error": outcome.note})
    return Response(status_code=200)


async def _click(request: Request, payload: dict[str, Any]) -> Outcome:
    dispatcher = dispatcher_for(request.app)
    if dispatcher is None:
        # Not connected to Temporal yet: a 503 makes Slack deliver the click again later.
        return Outcome("not connected to Temporal yet", status=503)
    try:
        return await dispatcher.handle_interaction(payload)
    except Exception as exc:
        too_large = too_large_for_temporal(exc)
        if too_large is not None:  # delivered again it would be refused again
            return Outcome(f"too large for Temporal: {too_large}", status=413)
        # A 5xx makes Slack deliver it again, so a passing outage loses nothing.
        log.exception("slack interaction failed")
        return Outcome("failed", status=500)


def _ack(outcome: Outcome, background: BackgroundTasks) -> Response:
    if outcome.status >= 400:
        log.warning("slack request answered %s: %s", outcome.status, outcome.note)
        return _reply(outcome.status, {"ok": False, "error": outcome.note})
    if outcome.followups:
        background.add_task(outcome.run_followups)
    return Response(status_code=200)


def _reply(status: int, body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(body, status_code=status)
