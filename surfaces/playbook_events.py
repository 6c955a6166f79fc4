"""GitHub deliveries and Slack events that match a registered playbook event start the runs
of the playbooks listening for it.

The registry's events (`playbooks/registry.yaml`, stored by `openloop playbooks apply`) say
what they match: a GitHub event type and filters (`{event: workflow_run, conclusion: failure,
branch: main}`), or a Slack mention, a message matching a pattern in a channel, or a
reaction. A filter or an event field is looked up by name in the payload: a dotted path
(`workflow_run.head_sha`), a top-level value, the value in the event's own object
(`workflow_run.conclusion` for `conclusion`), or a common alias (`repo`, `branch`, `url`).
The run key is the delivery id or Slack's `event_id`, so a redelivery starts nothing new.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from temporalio.service import RPCError

from activities.playbooks.starts import Started, start_listening
from activities.store import playbooks as playbook_rows
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.limits import too_large_answer, too_large_for_temporal
from workflows.playbook_types import EventType

log = logging.getLogger("openloop.playbooks")

_ALIASES: dict[str, tuple[str, ...]] = {
    "repo": ("repository.full_name",),
    "repository": ("repository.full_name",),
    "sender": ("sender.login",),
    "user": ("sender.login", "user"),
    "branch": ("{event}.head_branch", "pull_request.head.ref", "ref"),
    "url": ("{event}.html_url",),
    "run_url": ("{event}.html_url",),
    "run_id": ("{event}.id",),
    "workflow": ("{event}.name",),
    "title": ("issue.title", "pull_request.title", "{event}.name"),
    "channel": ("item.channel",),
}


def lookup(payload: Mapping[str, Any], name: str, own: str = "") -> Any:
    """The value called `name` in a payload (see the module's docstring), or None."""
    paths = [name, f"{own}.{name}" if own else "", *(a.format(event=own) for a in _ALIASES.get(name, ()))]
    for path in filter(None, paths):
        value: Any = payload
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is not None and not isinstance(value, Mapping):
            if isinstance(value, str) and path == "ref":
                value = value.removeprefix("refs/heads/")
            return value
    return None


def _same(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, list):
        return any(_same(found, one) for one in wanted)
    as_text = lambda v: str(v).lower()  # noqa: E731 - JSON's true and YAML's True alike
    return found is not None and as_text(found) == as_text(wanted)


def github_matches(event_type: EventType, event: str, payload: Mapping[str, Any]) -> bool:
    match = event_type.match
    if match.get("event") != event:
        return False
    filters = {key: wanted for key, wanted in match.items() if key not in ("event", "paths")}
    return all(_same(lookup(payload, key, event), wanted) for key, wanted in filters.items())


def slack_matches(event_type: EventType, inner: Mapping[str, Any]) -> bool:
    match, kind = event_type.match, event_type.match.get("kind")
    channel = inner.get("channel") or lookup(inner, "channel")
    if match.get("channel") and match["channel"] != channel:
        return False
    if kind == "mention":
        return inner.get("type") == "app_mention"
    if kind == "reaction":
        return inner.get("type") == "reaction_added" and inner.get("reaction") == match.get("name")
    if kind == "message":
        human = inner.get("type") == "message" and not inner.get("subtype") and not inner.get("bot_id")
        return human and re.search(str(match.get("pattern", "")), str(inner.get("text") or "")) is not None
    return False


def _at(payload: Mapping[str, Any], path: str) -> Any:
    """The value at a built-in event's path (`config.playbooks.github_builtins`): `a.b`, `a.b?`
    (whether it is there) or `a.b#` (how many items it holds)."""
    value: Any = payload
    for part in path.rstrip("?#").split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if path.endswith("?"):
        return value is not None
    if path.endswith("#"):
        return len(value) if isinstance(value, list) else 0
    return value


def fields_of(event_type: EventType, payload: Mapping[str, Any], own: str = "") -> dict[str, Any]:
    """The event's declared fields found in the payload (a missing one is left out); a built-in
    event's at the paths it names."""
    paths = event_type.match.get("paths") or {}
    found = {
        field.name: _at(payload, paths[field.name])
        if field.name in paths
        else lookup(payload, field.name, own)
        for field in event_type.fields
    }
    return {name: value for name, value in found.items() if value is not None}


async def _start(
    settings: Settings, app: FastAPI, matched: list[tuple[EventType, dict[str, Any]]], run_key: str
) -> Started:
    pool = await get_pool(settings.require_database_url())
    outcome = Started()
    for event_type, fields in matched:
        started = await start_listening(
            app.state.temporal, pool, settings.task_queue, event_type.name, fields, run_key
        )
        outcome.started += started.started
        outcome.duplicates += started.duplicates
    return outcome


async def _registered(settings: Settings, source: str) -> list[EventType]:
    if not settings.database_url:
        return []
    return await playbook_rows.registered_events(await get_pool(settings.database_url), source)


def _answer(outcome: Started) -> JSONResponse:
    if outcome.started:
        return JSONResponse({"status": "started", "playbook_runs": outcome.started}, status_code=202)
    return JSONResponse({"status": "duplicate", "playbook_runs": outcome.duplicates}, status_code=200)


def with_runs(agent_answer: JSONResponse, playbooks: JSONResponse | None) -> JSONResponse:
    """The agent path's answer to a delivery, saying which playbook runs it started too."""
    if playbooks is None:
        return agent_answer
    body = json.loads(bytes(agent_answer.body))
    runs = json.loads(bytes(playbooks.body))
    if body.get("status") == "ignored":  # no agent took it: the playbooks' answer is the answer
        return playbooks
    return JSONResponse(
        {**body, "playbook_runs": runs["playbook_runs"]}, status_code=agent_answer.status_code
    )


async def github_delivery(
    app: FastAPI, event: str, delivery: str, payload: dict[str, Any]
) -> JSONResponse | None:
    """Start the playbooks for a (signature-checked) delivery; None when no event matches."""
    settings: Settings = app.state.settings
    matched = [
        (event_type, fields_of(event_type, payload, event))
        for event_type in await _registered(settings, "github")
        if github_matches(event_type, event, payload)
    ]
    return await _started_or_refused(app, matched, delivery, f"GitHub delivery {delivery}")


async def slack_event(app: FastAPI, payload: dict[str, Any]) -> JSONResponse | None:
    """Start the playbooks for a (signature-checked) Slack event; None when no event matches."""
    inner, event_id = payload.get("event"), payload.get("event_id")
    if payload.get("type") != "event_callback" or not isinstance(inner, dict) or not event_id:
        return None
    matched = [
        (event_type, fields_of(event_type, inner))
        for event_type in await _registered(app.state.settings, "slack")
        if slack_matches(event_type, inner)
    ]
    return await _started_or_refused(app, matched, str(event_id), f"Slack event {event_id}")


async def _started_or_refused(
    app: FastAPI, matched: list[tuple[EventType, dict[str, Any]]], run_key: str, what: str
) -> JSONResponse | None:
    if not matched:
        return None
    if app.state.temporal is None:
        return JSONResponse({"error": "not connected to Temporal yet; send it again"}, status_code=503)
    try:
        outcome = await _start(app.state.settings, app, matched, run_key)
    except RPCError as exc:
        log.warning("%s: playbook runs not started: %s", what, exc)
        too_large = too_large_for_temporal(exc)
        if too_large is not None:  # sent again it would be refused again
            return too_large_answer(too_large)
        return JSONResponse({"error": "Temporal is unavailable; send it again"}, status_code=503)
    log.info("%s started playbook runs %s", what, outcome.started or "none (duplicate)")
    return _answer(outcome)
