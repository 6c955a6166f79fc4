"""`openloop playbooks apply`, below the command line: store the compiled folder, then bring
the Temporal Schedules of cron playbooks and poll sensors in line with what is now applied."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client

from activities.playbooks.schedules import DEFAULT_OVERLAP, Reconciled, reconcile_schedules
from activities.playbooks.sensor_polls import reconcile_sensor_polls
from activities.store import playbooks as playbook_rows
from workflows.playbook_calls import SensorPoll
from workflows.playbook_types import CompiledPlaybook, EventType


@dataclass
class ApplyResult:
    stored: playbook_rows.Applied
    schedules: Reconciled
    polls: Reconciled


async def apply_playbooks(
    client: Client,
    pool: AsyncConnectionPool,
    playbooks: Sequence[CompiledPlaybook],
    events: Sequence[EventType],
    task_queue: str,
    overlap: str = DEFAULT_OVERLAP,
    applied_by: str = "",
    polls: Sequence[tuple[SensorPoll, float]] = (),
) -> ApplyResult:
    """Store new versions of changed playbooks, retire gone ones, reconcile the schedules of
    cron playbooks and of `poll=` sensors (each with its interval in seconds)."""
    stored = await playbook_rows.apply_playbooks(pool, playbooks, events, applied_by)
    # Every playbook ever applied may have left a schedule (a cron since changed or removed).
    ever = [p.name for p in await playbook_rows.latest_playbooks(pool, with_retired=True)]
    schedules = await reconcile_schedules(client, stored.playbooks, task_queue, overlap, ever)
    return ApplyResult(stored, schedules, await reconcile_sensor_polls(client, polls, task_queue))
