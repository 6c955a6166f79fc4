"""Playbooks as the dashboard reads them: each playbook's latest version with when and by whom it
was applied, whether it is retired, and its last run; and every stored version of one playbook.

`activities.store.playbooks` keeps what the runtime needs (the compiled playbook only); the
pages also want the rows' bookkeeping, so these reads live apart and never write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from workflows.playbook_types import CompiledPlaybook


@dataclass(frozen=True)
class PlaybookVersion:
    playbook: CompiledPlaybook  # `version` set
    applied_at: datetime
    applied_by: str
    retired_at: datetime | None  # set on the latest version of a playbook whose files are gone


@dataclass(frozen=True)
class PlaybookSummary:
    latest: PlaybookVersion
    runs: int
    last_run_id: str | None
    last_status: str | None
    last_run_at: datetime | None


_SUMMARIES = """
SELECT p.*, r.run_id AS last_run_id, r.status AS last_status, r.started_at AS last_run_at,
       (SELECT count(*) FROM playbook_runs c WHERE c.playbook = p.name) AS runs
FROM (SELECT DISTINCT ON (name) * FROM playbooks ORDER BY name, version DESC) p
LEFT JOIN LATERAL (
    SELECT run_id, status, started_at FROM playbook_runs
    WHERE playbook = p.name ORDER BY started_at DESC LIMIT 1
) r ON true
WHERE (%(name)s::text IS NULL OR strpos(p.name, %(name)s) > 0)
  AND (%(trigger)s::text IS NULL OR p.trigger_kind = %(trigger)s)
  AND (%(retired)s::boolean IS NULL OR (p.retired_at IS NOT NULL) = %(retired)s)
  AND (%(last_status)s::text IS NULL OR r.status = %(last_status)s)
ORDER BY p.retired_at IS NOT NULL, p.name
"""


def _version(row: dict[str, Any]) -> PlaybookVersion:
    playbook = CompiledPlaybook.model_validate(row["spec"]).model_copy(
        update={"version": int(row["version"])}
    )
    return PlaybookVersion(playbook, row["applied_at"], row["applied_by"], row["retired_at"])


async def playbook_summaries(
    pool: AsyncConnectionPool,
    *,
    name: str | None = None,
    trigger: str | None = None,
    retired: bool | None = None,
    last_status: str | None = None,
) -> list[PlaybookSummary]:
    """Every playbook's latest version (current ones first), filtered: `name` is a substring,
    `trigger` a `TriggerKind` value, `last_status` the last run's status."""
    params = {"name": name, "trigger": trigger, "retired": retired, "last_status": last_status}
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(_SUMMARIES, params)
        rows = await cursor.fetchall()
    return [
        PlaybookSummary(
            _version(row), int(row["runs"]), row["last_run_id"], row["last_status"], row["last_run_at"]
        )
        for row in rows
    ]


async def playbook_versions(pool: AsyncConnectionPool, name: str) -> list[PlaybookVersion]:
    """Every stored version of `name`, oldest first (empty when it was never applied)."""
    async with pool.connection() as conn:
        cursor = await conn.cursor(row_factory=dict_row).execute(
            "SELECT * FROM playbooks WHERE name = %s ORDER BY version", (name,)
        )
        return [_version(row) for row in await cursor.fetchall()]
