"""Starting playbook runs for an event: the one way every entry point does it.

GitHub deliveries, Slack events, signed `/hooks/NAME` webhooks, sensors, emitted events and
`openloop playbooks` all come here. A run's workflow id derives from the playbook and the
event's key (a delivery id, a Slack event id, the emitting run and step), and a start for an
id that already ran is refused by Temporal (`REJECT_DUPLICATE`) or found in the runs table
(after Temporal forgot it), so a redelivered event never starts a second run.

Every run counts under the outside event that began its chain (`origin`,
`activities.store.playbook_origins`): the first runs an event starts are as many as the
playbooks listening, and a run an emitted event would start past `MAX_RUNS_PER_EVENT` is
refused, so two playbooks that emit each other's events stop however wide they fan out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from activities.store import playbooks as playbook_rows
from activities.store.playbook_origins import count_run
from workflows import search
from workflows.playbook_calls import MAX_RUNS_PER_EVENT
from workflows.playbook_types import PLAYBOOK_WORKFLOW_NAME, CompiledPlaybook, PlaybookRunInput

_UNSAFE = re.compile(r"[^\w.:@+-]")
MAX_KEY_CHARS = 200


@dataclass
class Started:
    started: list[str] = field(default_factory=list)  # workflow ids started now
    duplicates: list[str] = field(default_factory=list)  # already started for this event
    refused: list[str] = field(default_factory=list)  # playbooks not started: the runs cap


def run_workflow_id(playbook: str, run_key: str) -> str:
    return f"playbook-{playbook}-{_UNSAFE.sub('_', run_key)[:MAX_KEY_CHARS]}"


def run_search_attributes(playbook: str) -> TypedSearchAttributes:
    return TypedSearchAttributes([SearchAttributePair(search.PLAYBOOK, playbook)])


async def start_run(
    client: Client,
    pool: AsyncConnectionPool,
    task_queue: str,
    playbook: CompiledPlaybook,
    event_name: str,
    event: Mapping[str, Any],
    run_key: str,
    depth: int = 0,
    origin: str = "",
) -> tuple[str, bool]:
    """Start `playbook`'s run for this event; (workflow id, False) when it already ran."""
    workflow_id = run_workflow_id(playbook.name, run_key)
    if await playbook_rows.get_run(pool, workflow_id) is not None:
        return workflow_id, False
    try:
        await client.start_workflow(
            PLAYBOOK_WORKFLOW_NAME,
            PlaybookRunInput(
                playbook=playbook,
                event_name=event_name,
                event=dict(event),
                run_key=run_key,
                depth=depth,
                origin=origin,
            ),
            id=workflow_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            search_attributes=run_search_attributes(playbook.name),
            static_summary=f"playbook {playbook.name} v{playbook.version} on {event_name}",
        )
    except WorkflowAlreadyStartedError:
        return workflow_id, False
    return workflow_id, True


async def start_listening(
    client: Client,
    pool: AsyncConnectionPool,
    task_queue: str,
    event_name: str,
    event: Mapping[str, Any],
    run_key: str,
    depth: int = 0,
    origin: str = "",
    source: str = "",
) -> Started:
    """Start a run of every current playbook whose entry step is `on: event_name`, each counted
    under `origin` (this event, at depth 0); an emitted event's (depth > 0, from the run
    `source`, counted too) is refused for a playbook once `origin` has `MAX_RUNS_PER_EVENT`."""
    origin = origin or f"{event_name}/{run_key}"
    limit = MAX_RUNS_PER_EVENT if depth > 0 else None
    outcome = Started()
    for playbook in await playbook_rows.listening(pool, event_name):
        planned = run_workflow_id(playbook.name, run_key)
        if not await count_run(pool, origin, planned, limit, counted=source):
            outcome.refused.append(playbook.name)
            continue
        workflow_id, started = await start_run(
            client, pool, task_queue, playbook, event_name, event, run_key, depth, origin
        )
        (outcome.started if started else outcome.duplicates).append(workflow_id)
    return outcome


async def run_status(client: Client, workflow_id: str) -> WorkflowExecutionStatus | None:
    """Temporal's status of a run, or None when Temporal no longer knows it."""
    try:
        return (await client.get_workflow_handle(workflow_id).describe()).status
    except RPCError:
        return None
