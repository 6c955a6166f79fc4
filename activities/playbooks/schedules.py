"""Temporal Schedules for playbooks whose entry step is `on: cron("...", tz=...)`.

`reconcile_schedules` brings the server in line with the applied playbooks, and is safe to
run again: a missing schedule is created, one whose playbook, cron, time zone, overlap policy
or task queue changed is updated (keeping whether an operator paused it), and one whose
playbook is gone (or no longer on a cron) is deleted. What a schedule was made from is kept
as a signature in its action's memo, so an unchanged playbook is left alone.

Each firing starts `PlaybookRunWorkflow` with the scheduled run key: Temporal appends the
time to the action's workflow id, and the run records that time as its key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from activities.playbooks.starts import run_search_attributes
from workflows.playbook_calls import CRON_EVENT, SCHEDULED_RUN_KEY
from workflows.playbook_types import PLAYBOOK_WORKFLOW_NAME, CompiledPlaybook, PlaybookRunInput, TriggerKind

SCHEDULE_PREFIX = "openloop-playbook-"
SIGNATURE_MEMO = "openloop_playbook_signature"
OVERLAP_POLICIES = {policy.name.lower(): policy for policy in ScheduleOverlapPolicy if policy.value}
DEFAULT_OVERLAP = "skip"
# A firing missed while the server was down still runs if it is less than an hour late.
CATCHUP_WINDOW = timedelta(hours=1)


@dataclass
class Reconciled:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def schedule_gone(err: RPCError) -> bool:
    """The schedule does not exist (a deleted one answers that its workflow completed)."""
    return err.status == RPCStatusCode.NOT_FOUND or "already completed" in err.message


def schedule_id(playbook: str) -> str:
    return f"{SCHEDULE_PREFIX}{playbook}"


def signature(playbook: CompiledPlaybook, task_queue: str, overlap: str) -> str:
    trigger = playbook.trigger
    made_of = [playbook.content_hash, playbook.version, trigger.cron, trigger.timezone, overlap, task_queue]
    return hashlib.sha256(json.dumps(made_of).encode()).hexdigest()


def playbook_schedule(
    playbook: CompiledPlaybook, task_queue: str, overlap: str = DEFAULT_OVERLAP
) -> Schedule:
    trigger = playbook.trigger
    assert trigger.kind is TriggerKind.CRON and trigger.cron is not None
    return Schedule(
        action=ScheduleActionStartWorkflow(
            PLAYBOOK_WORKFLOW_NAME,
            PlaybookRunInput(playbook=playbook, event_name=CRON_EVENT, run_key=SCHEDULED_RUN_KEY),
            id=f"playbook-{playbook.name}-cron",  # Temporal appends each firing's time
            task_queue=task_queue,
            memo={SIGNATURE_MEMO: signature(playbook, task_queue, overlap)},
            typed_search_attributes=run_search_attributes(playbook.name),
            static_summary=f"playbook {playbook.name} v{playbook.version} on cron",
        ),
        spec=ScheduleSpec(cron_expressions=[trigger.cron], time_zone_name=trigger.timezone),
        policy=SchedulePolicy(overlap=OVERLAP_POLICIES[overlap], catchup_window=CATCHUP_WINDOW),
    )


async def current_signature(client: Client, sid: str, memo_key: str = SIGNATURE_MEMO) -> str | None:
    """The signature of the schedule `sid` on the server; "" if it has none, None if absent."""
    try:
        described = await client.get_schedule_handle(sid).describe()
    except RPCError as err:
        if schedule_gone(err):
            return None
        raise
    action = described.schedule.action
    memo = action.memo if isinstance(action, ScheduleActionStartWorkflow) else None
    raw = (memo or {}).get(memo_key)
    if raw is None:
        return ""
    value = client.data_converter.payload_converter.from_payloads([raw])[0]  # type: ignore[list-item]
    return str(value)


async def reconcile_schedules(
    client: Client,
    playbooks: Sequence[CompiledPlaybook],
    task_queue: str,
    overlap: str = DEFAULT_OVERLAP,
    known_before: Iterable[str] = (),
) -> Reconciled:
    """Create, update or delete playbook schedules so they match `playbooks` (the current
    ones). `known_before`: playbooks that had a schedule once (retired ones included), so a
    schedule the server does not list yet is still found and deleted."""
    done = Reconciled()
    wanted = {p.name: p for p in playbooks if p.trigger.kind is TriggerKind.CRON}
    for name, playbook in sorted(wanted.items()):
        sid = schedule_id(name)
        schedule = playbook_schedule(playbook, task_queue, overlap)
        current = await current_signature(client, sid)
        if current is None:
            await client.create_schedule(sid, schedule)
            done.created.append(name)
        elif current == signature(playbook, task_queue, overlap):
            done.unchanged.append(name)
        else:

            def replace(previous: ScheduleUpdateInput, schedule: Schedule = schedule) -> ScheduleUpdate:
                schedule.state = previous.description.schedule.state  # paused stays paused
                return ScheduleUpdate(schedule=schedule)

            await client.get_schedule_handle(sid).update(replace)
            done.updated.append(name)
    candidates = {schedule_id(name): name for name in known_before}
    async for listed in await client.list_schedules():
        if listed.id.startswith(SCHEDULE_PREFIX):
            candidates[listed.id] = listed.id[len(SCHEDULE_PREFIX) :]
    for sid, name in sorted(candidates.items()):
        if name in wanted:
            continue
        try:
            await client.get_schedule_handle(sid).delete()
        except RPCError as err:
            if not schedule_gone(err):
                raise
            continue
        done.deleted.append(name)
    return done
