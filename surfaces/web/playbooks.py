"""Playbook pages, read-only: every applied playbook (trigger, next scheduled run, last run,
retired ones marked); one playbook's DAG of steps, what still holds of it on this stack (its
agents applied, its events registered, its webhook secret set), its versions with the diff
between any two and its recent runs; and one run's steps with their outputs, costs and tasks.
Changing a playbook is `openloop playbooks apply`, never a page.

Secrets: a webhook's HMAC secret is shown by the name of its environment variable and whether
it is set, never by value; everything else shown goes through `masked`.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from croniter import croniter
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from activities.store import playbooks as playbook_rows
from activities.store.agents import list_agents
from activities.store.playbook_views import PlaybookVersion, playbook_summaries, playbook_versions
from surfaces.web.auth import Person, person
from surfaces.web.common import masked, pool, render, web_ui_link
from workflows.playbook_types import (
    CompiledPlaybook,
    EventType,
    FieldKind,
    PlaybookRunStatus,
    PlaybookStep,
    StepStatus,
    Trigger,
    TriggerKind,
    TypedField,
)

router = APIRouter()
RUNS_SHOWN = 25
STATES = {"current": False, "retired": True}
# The drawing: one column per topological level, a box per step, edges left to right.
BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 180, 46, 56, 18, 10


def field_text(field: TypedField) -> str:
    """A typed field as the step file writes it: `verdict: enum[pass, fail]`, `url: str?`."""
    kind = f"enum[{', '.join(field.choices)}]" if field.kind is FieldKind.ENUM else field.kind.value
    return f"{field.name}: {kind}{'?' if field.optional else ''}"


def trigger_text(trigger: Trigger) -> str:
    if trigger.kind is TriggerKind.CRON:
        return f'cron("{trigger.cron}", tz="{trigger.timezone}")'
    return f"on {trigger.event}"


def next_run(trigger: Trigger, now: datetime | None = None) -> datetime | None:
    """When a cron trigger fires next, in its time zone (None for an event trigger)."""
    if trigger.kind is not TriggerKind.CRON or not trigger.cron:
        return None
    try:
        start = (now or datetime.now(UTC)).astimezone(ZoneInfo(trigger.timezone))
        fires: datetime = croniter(trigger.cron, start).get_next(datetime)
    except (ZoneInfoNotFoundError, ValueError, KeyError):
        return None  # the compiler refuses both; an old row must still render
    return fires


@dataclass(frozen=True)
class Box:
    step: PlaybookStep
    level: int
    x: int
    y: int


@dataclass(frozen=True)
class Drawing:
    boxes: list[Box]
    edges: list[tuple[str, str, str]]  # upstream, downstream, the SVG path between them
    width: int
    height: int
    box_w: int = BOX_W
    box_h: int = BOX_H


def _edge(up: Box, down: Box) -> str:
    x1, y1, x2, y2 = up.x + BOX_W, up.y + BOX_H // 2, down.x, down.y + BOX_H // 2
    bend = GAP_X // 2
    return f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2 - 6},{y2}"


def drawing(playbook: CompiledPlaybook) -> Drawing:
    """Lay the DAG out by topological level (a step sits one column right of its last `after`)."""
    level: dict[str, int] = {}
    for step in playbook.steps:  # the compiler stores them in topological order
        level[step.name] = 1 + max((level.get(name, 0) for name in step.after), default=-1)
    rows: dict[int, int] = {}
    boxes: dict[str, Box] = {}
    for step in playbook.steps:
        column = level[step.name]
        row = rows.get(column, 0)
        rows[column] = row + 1
        x, y = MARGIN + column * (BOX_W + GAP_X), MARGIN + row * (BOX_H + GAP_Y)
        boxes[step.name] = Box(step, column, x, y)
    edges = [
        (up, box.step.name, _edge(boxes[up], box))
        for box in boxes.values()
        for up in box.step.after
        if up in boxes
    ]
    width = 2 * MARGIN + (max(rows, default=0) + 1) * (BOX_W + GAP_X) - GAP_X
    height = 2 * MARGIN + max(rows.values(), default=1) * (BOX_H + GAP_Y) - GAP_Y
    return Drawing(sorted(boxes.values(), key=lambda b: (b.level, b.y)), edges, width, height)


def webhook_secret(event: EventType | None) -> tuple[str, bool] | None:
    """The environment variable holding a webhook event's HMAC secret, and whether it is set."""
    name = event.match.get("secret_env") if event is not None else None
    return (str(name), bool(os.environ.get(str(name)))) if name else None


def source_facts(event: EventType | None) -> list[tuple[str, str]]:
    """What selects the trigger event (`conclusion: failure`), the secret left out."""
    if event is None:
        return []
    shown = masked({k: v for k, v in event.match.items() if k != "secret_env"})
    return [(str(k), ", ".join(map(str, v)) if isinstance(v, list) else str(v)) for k, v in shown.items()]


def checks(playbook: CompiledPlaybook, agents: set[str], events: dict[str, EventType]) -> list[str]:
    """What no longer holds on this stack since the playbook was compiled and applied."""
    problems = []
    if playbook.trigger.kind is TriggerKind.EVENT and playbook.trigger.event not in events:
        problems.append(f"event {playbook.trigger.event} is not in the registry as last applied")
    if playbook.trigger.kind is TriggerKind.CRON and next_run(playbook.trigger) is None:
        problems.append(f"{trigger_text(playbook.trigger)} does not give a next run")
    secret = webhook_secret(events.get(playbook.trigger.event or ""))
    if secret is not None and not secret[1]:
        problems.append(f"{secret[0]} is not set: its webhook refuses every delivery")
    for step in playbook.steps:
        if step.agent not in agents:
            problems.append(f"step {step.name}: agent {step.agent} is not applied")
        if step.emits and step.emits not in events:
            problems.append(f"step {step.name}: emits {step.emits}, which is not in the registry")
    return problems


class _SpecDumper(yaml.SafeDumper):
    """YAML with multi-line text as blocks, so a changed instruction diffs line by line."""


_SpecDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def spec_yaml(playbook: CompiledPlaybook) -> str:
    spec = masked(playbook.model_dump(mode="json", exclude={"version"}))
    return yaml.dump(spec, Dumper=_SpecDumper, sort_keys=False, allow_unicode=True)


def version_diff(older: CompiledPlaybook, newer: CompiledPlaybook) -> list[str]:
    return list(
        difflib.unified_diff(
            spec_yaml(older).splitlines(),
            spec_yaml(newer).splitlines(),
            fromfile=f"v{older.version}",
            tofile=f"v{newer.version}",
            lineterm="",
        )
    )


def _choice(request: Request, key: str, allowed: list[str], upper: bool = False) -> str | None:
    value = request.query_params.get(key, "").strip()
    value = value.upper() if upper else value.lower()
    if value and value not in allowed:
        raise HTTPException(400, f"no {key} {value}; one of {', '.join(allowed)}")
    return value or None


@router.get("/playbooks", response_class=HTMLResponse)
async def playbooks(request: Request, who: Person = Depends(person)) -> HTMLResponse:
    trigger = _choice(request, "trigger", [kind.value for kind in TriggerKind])
    state = _choice(request, "state", list(STATES))
    last = _choice(request, "last", [status.value for status in PlaybookRunStatus], upper=True)
    name = request.query_params.get("name", "").strip() or None
    found = await playbook_summaries(
        await pool(request),
        name=name,
        trigger=trigger,
        retired=STATES[state] if state else None,
        last_status=last,
    )
    rows = [
        (summary, None if summary.latest.retired_at else next_run(summary.latest.playbook.trigger))
        for summary in found
    ]
    return render(
        request,
        "playbooks.html",
        who,
        rows=rows,
        trigger_text=trigger_text,
        filters={"name": name or "", "trigger": trigger or "", "state": state or "", "last": last or ""},
        triggers=[kind.value for kind in TriggerKind],
        states=list(STATES),
        statuses=[status.value for status in PlaybookRunStatus],
    )


def _pick(versions: list[PlaybookVersion], request: Request) -> tuple[PlaybookVersion, PlaybookVersion]:
    """The two versions to compare: ?from=&to=, by default the latest and the one before."""
    by_number = {v.playbook.version: v for v in versions}
    try:
        newer = by_number[int(request.query_params.get("to") or versions[-1].playbook.version)]
        default_older = max(newer.playbook.version - 1, versions[0].playbook.version)
        older = by_number[int(request.query_params.get("from") or default_older)]
    except (KeyError, ValueError):
        raise HTTPException(400, "no such version of this playbook") from None
    return older, newer


@router.get("/playbooks/{name}", response_class=HTMLResponse)
async def playbook(request: Request, name: str, who: Person = Depends(person)) -> HTMLResponse:
    db = await pool(request)
    versions = await playbook_versions(db, name)
    if not versions:
        raise HTTPException(404, f"no playbook {name}")
    older, current = _pick(versions, request)
    latest = versions[-1]
    events = {event.name: event for event in await playbook_rows.registered_events(db)}
    agents = {agent.name for agent in await list_agents(db)}
    shown = current.playbook
    trigger_event = events.get(shown.trigger.event or "")
    diff = version_diff(older.playbook, shown) if older is not current else []
    return render(
        request,
        "playbook.html",
        who,
        versions=versions,
        current=current,
        older=older,
        latest=latest,
        playbook=shown,
        trigger=trigger_text(shown.trigger),
        next_run=None if latest.retired_at else next_run(shown.trigger),
        event=trigger_event,
        source=source_facts(trigger_event),
        secret=webhook_secret(trigger_event),
        problems=[] if latest.retired_at else checks(latest.playbook, agents, events),
        dag=drawing(shown),
        field_text=field_text,
        diff=diff,
        spec=spec_yaml(shown),
        runs=await playbook_rows.list_runs(db, name, RUNS_SHOWN),
        succeeded=StepStatus.SUCCEEDED,
    )


@router.get("/playbooks/runs/{run_id}", response_class=HTMLResponse)
async def playbook_run(request: Request, run_id: str, who: Person = Depends(person)) -> HTMLResponse:
    db = await pool(request)
    run = await playbook_rows.get_run(db, run_id)
    if run is None:
        raise HTTPException(404, f"no playbook run {run_id}")
    record = run.record
    version = next(
        (
            v.playbook
            for v in await playbook_versions(db, record.playbook)
            if v.playbook.version == record.version
        ),
        None,
    )
    specs: dict[str, PlaybookStep] = {step.name: step for step in version.steps} if version else {}
    settings = request.app.state.settings
    return render(
        request,
        "playbook_run.html",
        who,
        run=run,
        record=record,
        steps=[
            (step, specs.get(step.name), masked(step.output), masked(step.answer)) for step in record.steps
        ],
        event=masked(record.event),
        web_ui=web_ui_link(request, settings.namespace, record.run_id),
    )
