"""Eval runs in Postgres (`eval_runs`, `eval_results`; migration 0022): saved by
`openloop eval run`, read by the dashboard's `/evals` pages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from surfaces.evals.checks import CheckResult
from surfaces.evals.results import CaseRun, EvalRun

__all__ = ["RunRow", "list_runs", "load_run", "save_run"]

LIST_LIMIT = 200


@dataclass(frozen=True)
class RunRow:
    """One run as the list shows it."""

    id: str
    dataset: str
    label: str
    started_at: datetime
    cases: int
    passed: int
    cost_usd: float
    compared_to: str | None

    @property
    def pass_rate(self) -> float:
        return self.passed / self.cases if self.cases else 0.0


async def save_run(pool: AsyncConnectionPool, run: EvalRun) -> None:
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO eval_runs (id, dataset, agent, version, model, label, compared_to, started_at, "
            "finished_at, cases, passed, cost_usd) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                run.id,
                run.dataset,
                run.agent,
                run.version,
                run.model,
                run.label,
                run.compared_to,
                run.started_at,
                run.finished_at,
                len(run.results),
                run.passed,
                run.cost_usd,
            ),
        )
        for r in run.results:
            checks = [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in r.checks]
            await conn.execute(
                "INSERT INTO eval_results (run_id, case_id, repeat, task_id, status, passed, checks, "
                "reply, steps, tokens, cost_usd, latency_ms) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    run.id,
                    r.case_id,
                    r.repeat,
                    r.task_id,
                    r.status,
                    r.passed,
                    Jsonb(checks),
                    r.reply,
                    r.steps,
                    r.tokens,
                    r.cost_usd,
                    r.latency_ms,
                ),
            )


async def list_runs(pool: AsyncConnectionPool, limit: int = LIST_LIMIT) -> list[RunRow]:
    async with pool.connection() as conn:
        cursor = conn.cursor(row_factory=dict_row)
        await cursor.execute(
            "SELECT id, dataset, label, started_at, cases, passed, cost_usd, compared_to "
            "FROM eval_runs ORDER BY started_at DESC LIMIT %s",
            (limit,),
        )
        return [RunRow(**row) for row in await cursor.fetchall()]


def _case(row: dict[str, Any]) -> CaseRun:
    checks = [CheckResult(c["name"], bool(c["passed"]), str(c.get("detail") or "")) for c in row["checks"]]
    return CaseRun(
        row["case_id"],
        row["repeat"],
        row["task_id"],
        row["status"],
        checks,
        row["reply"],
        row["steps"],
        row["tokens"],
        row["cost_usd"],
        row["latency_ms"],
    )


async def load_run(pool: AsyncConnectionPool, run_id: str) -> EvalRun | None:
    async with pool.connection() as conn:
        cursor = conn.cursor(row_factory=dict_row)
        await cursor.execute("SELECT * FROM eval_runs WHERE id = %s", (run_id,))
        head = await cursor.fetchone()
        if head is None:
            return None
        await cursor.execute(
            "SELECT * FROM eval_results WHERE run_id = %s ORDER BY case_id, repeat", (run_id,)
        )
        rows = await cursor.fetchall()
    return EvalRun(
        id=head["id"],
        dataset=head["dataset"],
        agent=head["agent"],
        version=head["version"],
        model=head["model"],
        label=head["label"],
        started_at=head["started_at"],
        finished_at=head["finished_at"],
        results=[_case(row) for row in rows],
        compared_to=head["compared_to"],
    )
