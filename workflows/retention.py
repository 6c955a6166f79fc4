"""Memory retention: a tiny workflow, started daily by a Temporal Schedule, that asks the
purge activity to delete memories past their `expires_at` (created + retention_days).

Deterministic and free of I/O: the activity is called by its stable name, so this module
imports no activity code; the database's clock decides what has expired.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

RETENTION_WORKFLOW_NAME = "openloop.MemoryRetention"
PURGE_EXPIRED_MEMORIES = "openloop.memory.purge_expired"
PURGE_TIMEOUT = timedelta(minutes=10)
PURGE_HEARTBEAT_TIMEOUT = timedelta(minutes=2)
PURGE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=5),
    maximum_attempts=5,
)


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
