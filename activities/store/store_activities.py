"""The Postgres activities: recall memories, purge expired ones, write an audit row, store a
task's constants.

Thin wrappers: the queries live in `memory`, `memory_search`, `ledger` and `task_constants`
beside this file.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.runtime import runtime
from activities.store import answer_streams, task_constants
from activities.store.embeddings import is_offline
from activities.store.ledger import UsageRow, write_audit, write_usage
from activities.store.memory import purge_expired
from activities.store.memory_search import search_with_usage
from workflows.errors import ErrorType
from workflows.retention import PURGE_EXPIRED_MEMORIES, PurgeInput, PurgeResult
from workflows.task_constants import SAVE_TASK_CONSTANTS, SaveTaskConstantsInput
from workflows.types import ActivityName, AuditEvent, RecallInput, RecallResult


@activity.defn(name=ActivityName.RECALL)
async def recall(inp: RecallInput) -> RecallResult:
    """The k memories of the task's scope that best fit the query."""
    pool = await runtime().pool()
    try:
        items, emb = await search_with_usage(pool, inp.memory, inp.query, inp.k)
    except ValueError as exc:  # a bad scope in the agent's spec: a retry cannot fix it
        raise ApplicationError(str(exc), type=ErrorType.MEMORY_SCOPE_ERROR, non_retryable=True) from None
    if emb is not None and not is_offline(emb.model):
        # A paid embedding call is a model call: it goes in the ledger, once per activity.
        info = activity.info()
        channel = inp.memory.scope_key if inp.memory.scope == "channel" else ""
        async with pool.connection() as conn:
            await write_usage(
                conn,
                UsageRow(
                    task_id=inp.task_id,
                    step=0,
                    agent=inp.memory.agent,
                    workspace=inp.memory.workspace,
                    channel=channel,
                    surface="",
                    model=emb.model,
                    prompt_tokens=emb.prompt_tokens,
                    completion_tokens=0,
                    cost_usd=emb.cost_usd,
                    key=f"recall:{info.activity_id}",
                    task_kind="embedding",
                ),
            )
    return RecallResult(items=items)


@activity.defn(name=PURGE_EXPIRED_MEMORIES)
async def purge_expired_memories(inp: PurgeInput) -> PurgeResult:
    """Purge in short batches, heartbeating between them, until nothing expired is left.
    Slack answer streams past any model call's retries go too (one small table)."""
    pool = await runtime().pool()
    streams = await answer_streams.prune(pool)
    if streams:
        activity.logger.info("pruned %d answer stream rows", streams)
    deleted = 0
    for batch in range(1, inp.max_batches + 1):
        count = await purge_expired(pool, inp.batch_size)
        deleted += count
        activity.heartbeat(deleted)
        if count < inp.batch_size:
            return PurgeResult(deleted=deleted, batches=batch, finished=True)
    return PurgeResult(deleted=deleted, batches=inp.max_batches, finished=False)


@activity.defn(name=ActivityName.RECORD_AUDIT)
async def record_audit(event: AuditEvent) -> None:
    """Write one audit row (idempotent: a retry of this activity writes nothing new)."""
    pool = await runtime().pool()
    async with pool.connection() as conn:
        await write_audit(conn, event)


@activity.defn(name=SAVE_TASK_CONSTANTS)
async def save_task_constants(inp: SaveTaskConstantsInput) -> None:
    """Store what every model call of the task shares (idempotent: a retry rewrites the row)."""
    await task_constants.save(await runtime().pool(), inp.task_id, inp.constants)
