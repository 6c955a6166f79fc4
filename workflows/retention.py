"""Memory retention: a tiny workflow, started daily by a Temporal Schedule, that asks the
purge activity to delete memories past their `expires_at` (created + retention_days).

Deterministic and free of I/O: the activity is called by its stable name, so this module
imports no activity code; the database's clock decides what has expired.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import PURGE_HEARTBEAT_TIMEOUT, PURGE_RETRY, PURGE_TIMEOUT

RETENTION_WORKFLOW_NAME = "openloop.MemoryRetention"
PURGE_EXPIRED_MEMORIES = "openloop.memory.purge_expired"


@dataclass
class PurgeInput:
    """How much one purge may delete: batches keep each transaction (and lock) short."""

    batch_size: int = 5_000
    max_batches: int = 200


@dataclass
class PurgeResult:
    deleted: int
    batches: int
    finished: bool  # False when max_batches stopped it; the next run continues


@workflow.defn(name=RETENTION_WORKFLOW_NAME)
class MemoryRetentionWorkflow:
    @workflow.run
    async def run(self, inp: PurgeInput) -> PurgeResult:
        return await workflow.execute_activity(
            PURGE_EXPIRED_MEMORIES,
            inp,
            result_type=PurgeResult,
            start_to_close_timeout=PURGE_TIMEOUT,
            heartbeat_timeout=PURGE_HEARTBEAT_TIMEOUT,
            retry_policy=PURGE_RETRY,
        )
