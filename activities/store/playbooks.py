"""Playbooks in Postgres: applied versions, the registry's events, and runs.

`apply_playbooks` takes the whole compiled folder: a playbook gets a new version only when
its content hash changed, one no longer in the folder is retired (its rows stay, so old runs
still read), and the registry's events are replaced by the folder's. Runs are one row each,
written by the run workflow when it starts, after each step and at its end; a write carries
the run's sequence number so a retried older write never replaces a newer one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from workflows.playbook_calls import RunRecord
from workflows.playbook_types import CompiledPlaybook, EventType, PlaybookRunStatus, TriggerKind

_LATEST = "SELECT DISTINCT ON (name) * FROM playbooks ORDER BY name, version DESC"  # then: retired or not


@dataclass
class Applied:
    """What an apply did: every current playbook (with its version) and what changed."""

    playbooks: list[CompiledPlaybook] = field(default_factory=list)
    created: list[str] = field(default_factory=list)  # "name v3"
    unchanged: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StoredRun:
    record: RunRecord
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None


def _playbook(row: dict[str, Any]) -> CompiledPlaybook:
    return CompiledPlaybook.model_validate(row["spec"]).model_copy(update={"version": int(row["version"])})


async def apply_playbooks(
    pool: AsyncConnectionPool,
    playbooks: Sequence[CompiledPlaybook],
    events: Sequence[EventType] = (),
    applied_by: str = "",
) -> Applied:
    """Store the folder's playbooks and events; retire playbooks that are gone."""
    applied = Applied()
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('playbooks-apply'))")
        cursor = await conn.cursor(row_factory=dict_row).execute(_LATEST)
        latest = {row["name"]: row for row in await cursor.fetchall()}
        for playbook in playbooks:
            row = latest.get(playbook.name)
            if row is not None and row["retired_at"] is None and row["content_hash"] == playbook.content_hash:
                applied.playbooks.append(_playbook(row))
                applied.unchanged.append(f"{playbook.name} v{row['version']}")
                continue
            version = 1 if row is None else int(row["version"]) + 1
            stored = playbook.model_copy(update={"version": version})
            await conn.execute(
                "INSERT INTO playbooks (name, version, content_hash, spec, trigger_kind, trigger_event,"
                " applied_by) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    playbook.name, version, playbook.content_hash, Jsonb(stored.model_dump(mode="json")),
                    playbook.trigger.kind.value, playbook.trigger.event, applied_by,
                ),
            )  # fmt: skip
            applied.playbooks.append(stored)
            applied.created.append(f"{playbook.name} v{version}")
        names = [playbook.name for playbook in playbooks]
        for name, row in sorted(latest.items()):
            if name not in names and row["retired_at"] is None:
                await conn.execute(
                    "UPDATE playbooks SET retired_at = now() WHERE name = %s AND version = %s",
                    (name, row["version"]),
                )
                applied.retired.append(name)
        await conn.execute(
            "DELETE FROM playbook_events WHERE NOT (name = ANY(%s))", ([e.name for e in events],)
        )
        for event in events:
            await conn.execute(
                "INSERT INTO playbook_events (name, spec) VALUES (%s, %s)"
                " ON CONFLICT (name) DO UPDATE SET spec = EXCLUDED.spec, applied_at = now()",
                (event.name, Jsonb(event.model_dump(mode="json"))),
            )
    return applied


async def latest_playbooks(
    pool: AsyncConnectionPool, *, with_retired: bool = False
) -> list[CompiledPlaybook]:
    """The latest version of every playbook still in the folder (or every playbook ever)."""
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(_LATEST)
        rows = await cursor.fetchall()
    return [_playbook(row) for row in rows if with_retired or row["retired_at"] is None]


async def get_playbook(pool: AsyncConnectionPool, name: str) -> CompiledPlaybook | None:
    """The latest applied version of `name`, unless it was retired."""
    return next((p for p in await latest_playbooks(pool) if p.name == name), None)


async def listening(pool: AsyncConnectionPool, event_name: str) -> list[CompiledPlaybook]:
    """The current playbooks whose entry step is `on: event_name`."""
    return [
        playbook
        for playbook in await latest_playbooks(pool)
        if playbook.trigger.kind is TriggerKind.EVENT and playbook.trigger.event == event_name
    ]


async def registered_events(pool: AsyncConnectionPool, source: str | None = None) -> list[EventType]:
    """The registry's events as of the last apply (only those from `source`, if given)."""
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT spec FROM playbook_events ORDER BY name"
        )
        events = [EventType.model_validate(row["spec"]) for row in await cursor.fetchall()]
    return [event for event in events if source is None or event.source == source]


async def record_run(pool: AsyncConnectionPool, record: RunRecord) -> None:
    """Insert or update the run's row; a write older than the stored one changes nothing."""
    finished = record.status is not PlaybookRunStatus.RUNNING
    steps = Jsonb([step.model_dump(mode="json") for step in record.steps])
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO playbook_runs (run_id, playbook, version, event_name, run_key, event, status,"
            " reason, steps, cost_usd, depth, seq, finished_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, CASE WHEN %s THEN now() END)"
            " ON CONFLICT (run_id) DO UPDATE SET status = EXCLUDED.status, reason = EXCLUDED.reason,"
            " event = EXCLUDED.event,"
            " steps = EXCLUDED.steps, cost_usd = EXCLUDED.cost_usd, seq = EXCLUDED.seq,"
            " updated_at = now(), finished_at = EXCLUDED.finished_at"
            " WHERE playbook_runs.seq < EXCLUDED.seq",
            (
                record.run_id, record.playbook, record.version, record.event_name, record.run_key,
                Jsonb(record.event), record.status.value, record.reason, steps, record.cost_usd,
                record.depth, record.seq, finished,
            ),
        )  # fmt: skip


async def last_cron_run(pool: AsyncConnectionPool, playbook: str, run_id: str) -> str | None:
    """The run key (scheduled time) of the playbook's latest cron run other than `run_id`."""
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT run_key FROM playbook_runs WHERE playbook = %s AND event_name = 'cron' AND run_id <> %s"
            " ORDER BY started_at DESC LIMIT 1",
            (playbook, run_id),
        )
        row = await cursor.fetchone()
    return str(row["run_key"]) if row else None


def _run(row: dict[str, Any]) -> StoredRun:
    record = RunRecord.model_validate({key: row[key] for key in RunRecord.model_fields if key in row})
    return StoredRun(record, row["started_at"], row["updated_at"], row["finished_at"])


async def list_runs(
    pool: AsyncConnectionPool, playbook: str | None = None, limit: int = 50
) -> list[StoredRun]:
    """The latest runs, newest first (of one playbook, if given)."""
    query = "SELECT * FROM playbook_runs"
    params: list[object] = []
    if playbook is not None:
        query += " WHERE playbook = %s"
        params.append(playbook)
    query += " ORDER BY started_at DESC LIMIT %s"
    params.append(limit)
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(query, params)
        return [_run(row) for row in await cursor.fetchall()]


async def get_run(pool: AsyncConnectionPool, run_id: str) -> StoredRun | None:
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT * FROM playbook_runs WHERE run_id = %s", (run_id,)
        )
        row = await cursor.fetchone()
    return _run(row) if row else None
